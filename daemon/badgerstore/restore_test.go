package badgerstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestBackupRestoreConverts is the conversion docs/security.md describes:
// an encrypted store backed up and restored into a plain one, and back.
func TestBackupRestoreConverts(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	src := t.TempDir()
	s, err := Open(src, Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", Task: "t",
		AppendMessages:  []core.Message{{Role: "user", ContentJSON: `"hello"`}, {Role: "assistant", ContentJSON: `"` + strings.Repeat("y", ValueThreshold+10) + `"`}},
		PendingToolUses: []core.ToolUse{{ID: "c1", Name: "w"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "c1", Output: "done"}); err != nil {
		t.Fatal(err)
	}
	// A deleted session's records must not come back.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "gone", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"bye"`}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSession(ctx, "gone", 0); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, tt := range []struct {
		name string
		key  []byte
	}{{"to plain", nil}, {"to another key", bytes.Repeat([]byte{3}, 16)}} {
		t.Run(tt.name, func(t *testing.T) {
			dst := t.TempDir()
			d, err := Open(dst, Options{EncryptionKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			n, err := d.Restore(bytes.NewReader(backup.Bytes()))
			if err != nil || n == 0 {
				t.Fatalf("Restore = %d, %v", n, err)
			}
			// A second restore is refused: the store holds sessions now.
			if _, err := d.Restore(bytes.NewReader(backup.Bytes())); !errors.Is(err, ErrNotEmpty) {
				t.Errorf("restore into a non-empty store: %v, want ErrNotEmpty", err)
			}
			d.Close()
			if _, err := Open(dst, Options{EncryptionKey: key}); !errors.Is(err, ErrEncryptionKey) {
				t.Fatalf("the restored store opens with the old key: %v", err)
			}
			d, err = Open(dst, Options{EncryptionKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ms, err := d.Messages(ctx, "s", 0, 0, 4<<20, 0)
			if err != nil || len(ms) != 2 || ms[0].ContentJSON != `"hello"` || len(ms[1].ContentJSON) != ValueThreshold+12 {
				t.Fatalf("restored messages: %d, %v", len(ms), err)
			}
			_, calls, err := d.PendingToolUses(ctx, "s")
			if err != nil || len(calls) != 1 || calls[0].Effect == nil || calls[0].Effect.Output != "done" {
				t.Fatalf("restored ledger: %+v, %v", calls, err)
			}
			if _, err := d.Checkpoint(ctx, "gone", 0); !errors.Is(err, core.ErrSessionNotFound) {
				t.Errorf("deleted session after restore: %v, want ErrSessionNotFound", err)
			}
			if files := filesHolding(t, dst, `"bye"`); len(files) > 0 && tt.key == nil {
				t.Errorf("a deleted session's message is in the restored files %v", files)
			}
			rep, err := d.Verify(ctx)
			if err != nil || len(rep.Damaged) != 0 {
				t.Fatalf("verify after restore: %+v, %v", rep, err)
			}
			// Writes go on from the restored state.
			if _, err := d.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1}); err != nil {
				t.Fatalf("save after restore: %v", err)
			}
		})
	}
}

// FuzzRestore feeds Restore arbitrary bytes: it may refuse them, never
// panic, and whatever it accepts leaves a store that verifies.
func FuzzRestore(f *testing.F) {
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}); err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if err := s.Backup(&good); err != nil {
		f.Fatal(err)
	}
	s.Close()
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()/2])
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Open("", Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Restore(bytes.NewReader(data)); err != nil {
			return
		}
		if _, err := d.Verify(ctx); err != nil {
			t.Fatalf("verify after an accepted restore: %v", err)
		}
	})
}
