package badgerstore

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestGCMovesRecoveredAtOpen leaves a store as a power cut during a
// value-log GC can (defect 18 of docs/reliability.md): the keys the GC
// moved durable, pointing at moved values that were not, and the collected
// file still there. An Open that finds GCFile writes the values back from
// the collected file; without GCFile the same store reads damaged.
func TestGCMovesRecoveredAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"plain", nil},
		{"encrypted", bytes.Repeat([]byte{7}, 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Now: newClock().now, DiskReserve: 1, EncryptionKey: tc.key}
			s := fillForGCWith(t, dir, opts)
			expireFinished(t, s)
			// The value-log files as they are before the GC: the cut
			// leaves them so, but for the moves, which it loses.
			before := map[string][]byte{}
			for f := range vlogFiles(t, dir) {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				before[f] = b
			}
			var rep MaintenanceReport
			if err := s.collectValueLog(&rep); err != nil {
				t.Fatal(err)
			}
			if rep.RewrittenLogs == 0 {
				t.Fatal("the GC rewrote nothing: nothing to check")
			}
			if _, err := os.Stat(filepath.Join(dir, GCFile)); !os.IsNotExist(err) {
				t.Fatalf("%s after the GC ended: %v", GCFile, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for f := range vlogFiles(t, dir) {
				if _, ok := before[f]; !ok {
					if err := os.Remove(filepath.Join(dir, f)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for f, b := range before {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}

			unmarked := t.TempDir()
			copyDir(t, dir, unmarked)
			if err := os.WriteFile(filepath.Join(dir, GCFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			// Without GCFile, the moved values are lost: the damage is real.
			u, err := Open(unmarked, opts)
			if err != nil {
				t.Fatal(err)
			}
			vr, err := u.Verify(ctx)
			u.Close()
			if err != nil || len(vr.Damaged) == 0 {
				t.Fatalf("the store without %s verified clean (%+v, %v): the test lost no moved value", GCFile, vr, err)
			}

			s, err = Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if vr, err := s.Verify(ctx); err != nil || len(vr.Damaged) > 0 {
				t.Fatalf("after the recovery: %+v, %v", vr.Damaged, err)
			}
			for i := range 4 {
				id := fmt.Sprintf("s%02d", i)
				ms, err := s.Messages(ctx, id, 0, 0, 8<<20, 0)
				if err != nil || len(ms) != 100 {
					t.Fatalf("session %s: %d messages, %v", id, len(ms), err)
				}
				for j, m := range ms {
					body := strings.Repeat("s", 200) // as fillForGCWith saved them
					if j%2 == 0 {
						body = strings.Repeat("b", 8<<10)
					}
					if want := userMsg(fmt.Sprintf("%d %s", j, body)); m.ContentJSON != want.ContentJSON {
						t.Fatalf("session %s message %d: %.40q, want %.40q", id, j, m.ContentJSON, want.ContentJSON)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(dir, GCFile)); !os.IsNotExist(err) {
				t.Fatalf("%s after the recovery: %v", GCFile, err)
			}
		})
	}
}

// FuzzScanValueLog feeds scanValueLog arbitrary files: it returns at the
// first entry that does not hold, without a panic.
func FuzzScanValueLog(f *testing.F) {
	f.Add(make([]byte, vlogHeaderSize))
	f.Add(append(make([]byte, vlogHeaderSize), 0, 0, 9, 3, 0, 'k', 'e', 'y', 0, 0, 0, 0, 0, 0, 0, 1, 'v', 'a', 'l', 0, 0, 0, 0))
	f.Add(append(make([]byte, vlogHeaderSize), 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "000001.vlog")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := scanValueLog(path, nil, func(_ int64, key, val []byte) {
			if len(key) <= 8 {
				t.Fatalf("a key of %d bytes, without its version", len(key))
			}
		})
		if err != nil && (len(data) < 8 || bytes.Equal(data[:8], make([]byte, 8))) {
			t.Fatalf("a plain file: %v", err)
		}
	})
}

// TestGCRecoveryAfterTheReplay leaves a store as a power cut during a GC
// can with a commit of the write-ahead log too: its keys reached Badger's
// memtable log, its values were cut off the value log. The replay gives
// the commit back at its version, so the recovery, which runs after it,
// finds nothing lost and logs no error; run before the replay it counted
// such values as lost.
func TestGCRecoveryAfterTheReplay(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{DiskReserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ms []core.Message
	for j := range 4 {
		ms = append(ms, userMsg(fmt.Sprintf("%d %s", j, strings.Repeat("c", 4<<10))))
	}
	mustSave(t, s, &core.SaveRequest{SessionID: "kept", AppendMessages: ms[:1]})
	crash := filepath.Join(t.TempDir(), "crash")
	func() {
		s.eng.ckptMu.Lock() // no checkpoint moves the log's mark past the save
		defer s.eng.ckptMu.Unlock()
		mustSave(t, s, &core.SaveRequest{SessionID: "cut", AppendMessages: ms})
		copyDir(t, dir, crash)
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The cut takes the save's values, from its first in the value log.
	cutAt := map[string]int64{}
	for f := range vlogFiles(t, crash) {
		path := filepath.Join(crash, f)
		if err := scanValueLog(path, nil, func(off int64, key, _ []byte) {
			if _, ok := cutAt[path]; !ok && bytes.Contains(key, []byte("cut\x00")) {
				cutAt[path] = off
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(cutAt) == 0 {
		t.Fatal("the save's values are in no value-log file")
	}
	for path, off := range cutAt {
		if err := os.Truncate(path, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(crash, GCFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	c, err := Open(crash, Options{DiskReserve: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.Contains(logs.String(), "replayed the write-ahead log") {
		t.Fatalf("no replay, so nothing to check:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "values found damaged") {
		t.Fatalf("the recovery counted the replayed commit's values as lost:\n%s", logs.String())
	}
	if vr, err := c.Verify(ctx); err != nil || len(vr.Damaged) > 0 {
		t.Fatalf("Verify: %+v, %v", vr.Damaged, err)
	}
	got, err := c.Messages(ctx, "cut", 0, 0, 8<<20, 0)
	if err != nil || len(got) != len(ms) {
		t.Fatalf("the cut session: %d messages, %v", len(got), err)
	}
	for j := range ms {
		if got[j].ContentJSON != ms[j].ContentJSON {
			t.Fatalf("message %d: %.40q, want %.40q", j, got[j].ContentJSON, ms[j].ContentJSON)
		}
	}
	if _, err := os.Stat(filepath.Join(crash, GCFile)); !os.IsNotExist(err) {
		t.Fatalf("%s after the recovery: %v", GCFile, err)
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
