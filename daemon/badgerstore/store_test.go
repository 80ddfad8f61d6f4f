package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	"github.com/savepoint-dev/savepoint/daemon/core/storetest"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestConformance(t *testing.T) {
	t.Run("InMemory", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) core.Store {
			s, err := Open("", Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("OnDisk", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) core.Store { return openT(t, t.TempDir()) })
	})
}

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var ctx = context.Background()

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hi"`}},
		PendingToolUses: []core.ToolUse{{ID: "t", Name: "w"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t", Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	_, calls, err := s.PendingToolUses(ctx, "s")
	if err != nil || len(calls) != 1 || calls[0].Effect == nil || calls[0].Effect.Output != "ok" {
		t.Fatalf("after reopen: %+v %v", calls, err)
	}
	ms, err := s.Messages(ctx, "s", 0, 0, 1<<20, 0)
	if err != nil || len(ms) != 1 || ms[0].ContentJSON != `"hi"` {
		t.Fatalf("messages after reopen: %+v %v", ms, err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	defer s.Close()
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// damage flips one byte of the value stored under key.
// damage flips a bit of key's stored value, as damage on the disk would. It
// writes beside the engine, so it also empties the record cache: a process
// keeps the copies it committed, and damage to the disk reaches it only
// through what it reads back (or through the scrub's findings, which are
// checked before the cache).
// rawView runs fn in a Badger read transaction at the last durable commit.
func rawView(s *Store, fn func(txn *badger.Txn) error) error {
	txn := s.readTxn()
	defer s.discardReadTxn(txn)
	return fn(txn)
}

// rawUpdate runs fn in a Badger transaction of its own, between two of the
// engine's commits, and makes it durable and readable as the engine makes a
// commit (without a commit sequence number).
func rawUpdate(s *Store, fn func(txn *badger.Txn) error) error {
	return s.eng.runExclusive(context.Background(), func() error {
		v := s.eng.version + 1
		txn := s.db.NewTransactionAt(s.eng.version, true)
		defer txn.Discard()
		if err := fn(txn); err != nil {
			return err
		}
		if err := txn.CommitAt(v, nil); err != nil {
			return err
		}
		if err := s.db.Sync(); err != nil {
			return err
		}
		s.eng.version = v
		s.db.SetDiscardTs(s.eng.snaps.advance(v))
		return nil
	})
}

func damage(t *testing.T, s *Store, key []byte) {
	t.Helper()
	defer s.eng.cache.clear()
	err := rawUpdate(s, func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v[len(v)-1] ^= 0xff
		return txn.Set(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDamagedValueIsDataLossForThatSessionOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func() []byte
	}{
		{"head", func() []byte { return sessionKey("bad") }},
		{"revision", func() []byte { return revisionKey("bad", 1) }},
		{"message", func() []byte { return messageKey("bad", 0) }},
		{"call", func() []byte { return ledgerEntryKey("bad", "t") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir())
			defer s.Close()
			for _, id := range []string{"bad", "good"} {
				if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}},
					PendingToolUses: []core.ToolUse{{ID: "t", Name: "w"}}}); err != nil {
					t.Fatal(err)
				}
			}
			// "bad" was resumed once (epoch 2), so deleting it needs its epoch.
			if _, err := s.Resume(ctx, "bad", false); err != nil {
				t.Fatal(err)
			}
			damage(t, s, tc.key())
			var errs []error
			_, err := s.Checkpoint(ctx, "bad", 0)
			errs = append(errs, err)
			_, err = s.Messages(ctx, "bad", 0, 0, 1<<20, 0)
			errs = append(errs, err)
			_, _, err = s.PendingToolUses(ctx, "bad")
			errs = append(errs, err)
			resumed, err := s.Resume(ctx, "bad", false)
			errs = append(errs, err)
			found := false
			epoch := resumed.Epoch
			for _, err := range errs {
				if err != nil && !errors.Is(err, core.ErrCheckpointCorrupt) {
					t.Fatalf("damaged %s: %v, want ErrCheckpointCorrupt", tc.name, err)
				}
				// Where the head is readable, the error carries the epoch.
				var se *core.StateError
				if errors.As(err, &se) {
					epoch = max(epoch, se.CurrentEpoch)
				} else if err != nil && tc.name != "head" {
					t.Fatalf("damaged %s: %v carries no epoch", tc.name, err)
				}
				found = found || err != nil
			}
			if !found {
				t.Fatalf("damaged %s was read without error", tc.name)
			}
			// The other session works, and the damaged one can be deleted.
			if _, err := s.Resume(ctx, "good", false); err != nil {
				t.Fatalf("good session: %v", err)
			}
			tomb, err := s.DeleteSession(ctx, "bad", epoch)
			if err != nil {
				t.Fatalf("delete damaged: %v", err)
			}
			if tomb < 1 {
				t.Fatalf("tombstone epoch %d fences nothing", tomb)
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "bad"}); err != nil {
				t.Fatalf("re-create after delete: %v", err)
			}
		})
	}
}

func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if err := s.update(func(t *tx) error {
		return put(t, formatKey, &storagev1.FormatRecord{Version: FormatVersion + 1})
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("open newer format: %v, want ErrFormat", err)
	}
}

func TestInterruptedDeleteFinishesAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}); err != nil {
		t.Fatal(err)
	}
	// Write the tombstone as DeleteSession does, then "crash" before the purge.
	if err := interruptDelete(s, "s"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	err := rawView(s, func(txn *badger.Txn) error {
		for _, kind := range []byte{kindRevision, kindMessage, kindPurge} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: sessionScope(kind, "s")})
			it.Rewind()
			left := it.Valid()
			it.Close()
			if left {
				t.Errorf("kind %d records left after reopen", kind)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}, {Role: "user", ContentJSON: `"y"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 || rep.CheckedSessions != 3 || rep.CheckedRecords < 3*4 {
		t.Fatalf("clean store: %+v %v", rep, err)
	}
	damage(t, s, revisionKey("b", 1))
	if err := rawUpdate(s, func(txn *badger.Txn) error { return txn.Delete(messageKey("c", 1)) }); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 2 || rep.Damaged[0].SessionID != "b" || rep.Damaged[1].SessionID != "c" {
		t.Fatalf("damaged store: %+v %v", rep, err)
	}
	t.Logf("%+v", rep.Damaged)
}

// TestLargestSave writes the largest save the daemon accepts (a 4 MiB
// request of the most records, with the longest ids, task and labels) in one
// transaction, as the sizing arithmetic above MemTableSize promises.
func TestLargestSave(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	sid := strings.Repeat("s", 128)
	labels := map[string]string{}
	for i := range 64 {
		labels[fmt.Sprintf("%063d", i)] = strings.Repeat("v", 256)
	}
	req := &core.SaveRequest{SessionID: sid, Task: strings.Repeat("t", 64<<10), Labels: labels,
		RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a01"}
	var pendingInput int
	for i := range core.MaxPendingToolUses {
		in := fmt.Sprintf("%q", strings.Repeat("i", 1000))
		pendingInput += len(in)
		req.PendingToolUses = append(req.PendingToolUses, core.ToolUse{ID: fmt.Sprintf("%0512d", i), Name: strings.Repeat("n", 256), InputJSON: in})
	}
	per := (MaxRequestBytes - 64<<10 - 64*(63+256) - pendingInput - core.MaxPendingToolUses*(512+256)) / core.MaxAppendMessages
	for range core.MaxAppendMessages {
		req.AppendMessages = append(req.AppendMessages, core.Message{Role: "user", ContentJSON: fmt.Sprintf("%q", strings.Repeat("m", per-8))})
	}
	if _, err := s.SaveCheckpoint(ctx, req); err != nil {
		t.Fatalf("the largest save: %v", err)
	}
}

// TestLargestSaveUnderThreshold writes the save that weighs most in a Badger
// transaction: the most records, each value just under ValueThreshold, so
// that none goes to the value log.
func TestLargestSaveUnderThreshold(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	sid := strings.Repeat("s", 128)
	size := func(content string) int {
		v, err := encodeValue(messageKey(sid, 0), &savepointv1.Message{Role: "user", ContentJson: content})
		if err != nil {
			t.Fatal(err)
		}
		return len(v)
	}
	content := `""`
	for size(content) < ValueThreshold-1 {
		content = content[:len(content)-1] + `m"`
	}
	req := &core.SaveRequest{SessionID: sid}
	for range core.MaxAppendMessages {
		req.AppendMessages = append(req.AppendMessages, core.Message{Role: "user", ContentJSON: content})
	}
	for i := range core.MaxPendingToolUses {
		// The ledger entry holds the id, the name and the input's digest:
		// together just under the threshold (checked below).
		req.PendingToolUses = append(req.PendingToolUses, core.ToolUse{ID: fmt.Sprintf("%0230d", i), Name: strings.Repeat("n", 220)})
	}
	if _, err := s.SaveCheckpoint(ctx, req); err != nil {
		t.Fatalf("the largest save under the value threshold: %v", err)
	}
	var call storagev1.LedgerEntryRecord
	err := s.view(ctx, func(tx *tx) error {
		v, found, err := tx.get(ledgerEntryKey(sid, req.PendingToolUses[0].ID))
		if !found || err != nil {
			return fmt.Errorf("call record: found %v, %v", found, err)
		}
		if len(v) >= ValueThreshold || len(v) < ValueThreshold-32 {
			return fmt.Errorf("a ledger entry record of %d bytes is not just under the threshold (%d) this test means to reach", len(v), ValueThreshold)
		}
		return decodeValue(ledgerEntryKey(sid, req.PendingToolUses[0].ID), v, &call)
	})
	if err != nil {
		t.Fatal(err)
	}
}
