package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// storeView is everything the API shows of a store's sessions.
func storeView(t *testing.T, s *Store) string {
	t.Helper()
	sums, err := s.ListSessions(ctx, "", 10000, core.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, sum := range sums {
		sum.UpdateTime = sum.UpdateTime.UTC()
		cp, err := s.Checkpoint(ctx, sum.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := s.Messages(ctx, sum.SessionID, 0, 0, 64<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		es, err := s.Effects(ctx, sum.SessionID, "", 10000)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%+v\n%+v\n%d messages %v\n", sum, cp, len(ms), reflect.ValueOf(ms).Len())
		for _, m := range ms {
			b.WriteString(m.ContentJSON)
		}
		for _, e := range es {
			fmt.Fprintf(&b, "%s %v %s %v\n", e.ToolUseID, e.Begun, e.IdempotencyKey, e.Effect)
		}
	}
	return b.String()
}

// TestBackupWhileServing takes a full backup and two incrementals of an
// encrypted store while another goroutine keeps saving, restores them in
// order into a new store, and finds it equal to the source.
func TestBackupWhileServing(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	src, err := Open(t.TempDir(), Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		mustSave(t, src, &core.SaveRequest{SessionID: id, AppendMessages: []core.Message{userMsg(strings.Repeat("m", 100*i))},
			PendingToolUses: []core.ToolUse{{ID: "t-" + id, Name: "w"}}})
		if i%3 == 0 {
			if _, _, err := src.RecordEffect(ctx, id, core.Effect{ToolUseID: "t-" + id, Output: "out"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var saves atomic.Int64
	wg.Go(func() {
		rev := mustSave(t, src, &core.SaveRequest{SessionID: "busy"}).Revision
		for !stop.Load() {
			res, err := src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "busy", ExpectedRevision: rev,
				AppendMessages: []core.Message{userMsg(strings.Repeat("b", 700))}})
			if err != nil {
				t.Error(err)
				return
			}
			rev = res.Revision
			saves.Add(1)
		}
	})
	var files []bytes.Buffer
	since := uint64(0)
	backup := func() {
		t.Helper()
		var f bytes.Buffer
		res, err := src.BackupSince(ctx, &f, since, false)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Encrypted || res.Next < since {
			t.Fatalf("backup since %d: %+v", since, res)
		}
		since = res.Next
		files = append(files, f)
	}
	backup() // full, during saves
	if _, err := src.DeleteSession(ctx, "s05", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s06", Status: core.StatusFailed, FinalOutput: "x"}); err != nil {
		t.Fatal(err)
	}
	backup() // incremental, during saves
	stop.Store(true)
	wg.Wait()
	backup() // incremental, quiet: the source no longer changes
	if saves.Load() == 0 {
		t.Fatal("no save ran during the backups")
	}
	if bytes.Contains(files[0].Bytes(), []byte(strings.Repeat("m", 500))) {
		t.Error("the encrypted backup holds a message in the clear")
	}

	dst, err := Open(t.TempDir(), Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := dst.Restore(bytes.NewReader(files[1].Bytes())); !errors.Is(err, ErrBackupOrder) {
		t.Fatalf("an incremental first: %v, want ErrBackupOrder", err)
	}
	for i := range files {
		if _, err := dst.Restore(bytes.NewReader(files[i].Bytes())); err != nil {
			t.Fatalf("restore file %d: %v", i, err)
		}
		if i == 0 {
			if _, err := dst.Restore(bytes.NewReader(files[2].Bytes())); !errors.Is(err, ErrBackupOrder) {
				t.Fatalf("the third file second: %v, want ErrBackupOrder", err)
			}
		}
	}
	if got, want := storeView(t, dst), storeView(t, src); got != want {
		t.Fatalf("restored store differs from the source:\n%s\nwant\n%s", got, want)
	}
	if rep, err := dst.Verify(ctx); err != nil || len(rep.Damaged) != 0 {
		t.Errorf("verify of the restored store: %+v %v", rep, err)
	}
	if _, err := dst.Checkpoint(ctx, "s05", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Errorf("a session deleted between backups came back: %v", err)
	}
	t.Logf("%d saves during the backups; files of %d, %d and %d bytes", saves.Load(), files[0].Len(), files[1].Len(), files[2].Len())
}

func TestBackupFileRefusals(t *testing.T) {
	plain := openT(t, t.TempDir())
	defer plain.Close()
	mustSave(t, plain, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{userMsg("secret")}})
	var f bytes.Buffer
	if _, err := plain.BackupSince(ctx, &f, 0, false); !errors.Is(err, core.ErrPlaintextBackup) || f.Len() != 0 {
		t.Fatalf("plaintext backup without consent: %v, %d bytes", err, f.Len())
	}
	res, err := plain.BackupSince(ctx, &f, 0, true)
	if err != nil || res.Encrypted {
		t.Fatalf("plaintext backup: %+v %v", res, err)
	}
	// Cut short anywhere, it is refused.
	for _, n := range []int{5, backupHeaderLen + 2, f.Len() - 3} {
		d := openT(t, t.TempDir())
		if _, err := d.Restore(bytes.NewReader(f.Bytes()[:n])); err == nil {
			t.Errorf("a file cut at %d of %d bytes restored", n, f.Len())
		}
		d.Close()
	}

	key := bytes.Repeat([]byte{1}, 16)
	enc, err := Open(t.TempDir(), Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	mustSave(t, enc, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{userMsg("secret")}})
	var ef bytes.Buffer
	if _, err := enc.BackupSince(ctx, &ef, 0, false); err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string][]byte{"no key": nil, "another key": bytes.Repeat([]byte{2}, 16)} {
		d, err := Open(t.TempDir(), Options{EncryptionKey: k})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Restore(bytes.NewReader(ef.Bytes())); !errors.Is(err, ErrBackupKey) {
			t.Errorf("%s: %v, want ErrBackupKey", name, err)
		}
		d.Close()
	}
	// A flipped byte fails authentication.
	bad := bytes.Clone(ef.Bytes())
	bad[backupHeaderLen+20] ^= 1
	d, err := Open(t.TempDir(), Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Restore(bytes.NewReader(bad)); err == nil {
		t.Error("a damaged encrypted file restored")
	}
}
