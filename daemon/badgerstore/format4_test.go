package badgerstore

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// TestMigrateFormat3 opens the format 3 fixture: each head takes its latest
// revision's segments, the interrupted delete is finished from its purge
// mark, the finished one is listed to expire, and the records that format 3
// wrote with the API's messages read as the store's own.
func TestMigrateFormat3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	copyDir(t, "testdata/format3", dir)
	s := openT(t, dir)
	defer s.Close()
	var rec storagev1.FormatRecord
	if err := s.view(ctx, func(t *tx) error { _, err := get(t, nil, "", formatKey, &rec); return err }); err != nil || rec.Version != FormatVersion {
		t.Fatalf("format after migration: %v %v", rec.Version, err)
	}

	// fixture-2: two segments in its head, as in its revision.
	err := s.view(ctx, func(tx *tx) error {
		h, err := mustHead(tx, "fixture-2")
		if err != nil {
			return err
		}
		r, err := revision(tx, "fixture-2", h, 0)
		if err != nil {
			return err
		}
		if len(h.Segments) != 2 || !slices.EqualFunc(h.Segments, r.Segments, func(a, b *storagev1.Segment) bool { return proto.Equal(a, b) }) {
			t.Errorf("head segments %v, revision segments %v", h.Segments, r.Segments)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "fixture-2", ExpectedRevision: 2, Epoch: 2,
		AppendMessages: []core.Message{{Role: "user", ContentJSON: `"d"`}}})
	if err != nil || res.MessageCount != 3 {
		t.Fatalf("save after migration: %+v %v", res, err)
	}
	msgs, err := s.Messages(ctx, "fixture-2", 0, 0, 1<<20, 0)
	if err != nil || len(msgs) != 3 || msgs[0].ContentJSON != `"a"` || msgs[1].ContentJSON != `"c"` || msgs[2].ContentJSON != `"d"` {
		t.Fatalf("history after migration: %+v %v", msgs, err)
	}

	// fixture-1: its pending call and effect, written as savepoint.v1
	// messages, read back.
	cp, err := s.Checkpoint(ctx, "fixture-1", 0)
	if err != nil || len(cp.PendingToolUses) != 1 || cp.PendingToolUses[0].Name != "write_report" || !cp.PendingToolUses[0].BeginTracked {
		t.Fatalf("fixture-1 after migration: %+v %v", cp, err)
	}
	_, calls, err := s.PendingToolUses(ctx, "fixture-1")
	if err != nil || len(calls) != 1 || calls[0].Effect == nil || calls[0].Effect.Output != "written" || calls[0].Effect.RecordTime.IsZero() {
		t.Fatalf("fixture-1 calls after migration: %+v %v", calls, err)
	}

	// fixture-4's delete was finished; both tombstones are listed to expire.
	err = rawView(s, func(txn *badger.Txn) error {
		for _, p := range [][]byte{sessionScope(kindMessage, "fixture-4"), sessionScope(kindRevision, "fixture-4"), {kindPurge}} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
			it.Rewind()
			if it.Valid() {
				t.Errorf("records under %q left after migration", p)
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := expiries(t, s); !slices.Equal(n, []string{"fixture-3", "fixture-4"}) {
		t.Errorf("tombstones listed to expire: %q", n)
	}
	if res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "fixture-4", Epoch: 1}); !errors.Is(err, core.ErrSessionFenced) {
		t.Errorf("create of fixture-4 at its deleted epoch: %+v %v", res, err)
	}
}

func expiries(t *testing.T, s *Store) []string {
	t.Helper()
	var sids []string
	err := rawView(s, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindExpiry}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_, sid, err := decodeExpiryKey(it.Item().Key())
			if err != nil {
				return err
			}
			sids = append(sids, sid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sids)
	return sids
}

// TestSaveReadsNoRevision removes a session's latest revision record: the
// next save still succeeds, since it takes what it needs from the head.
// (Before format 4 a save read the previous revision, state included.)
func TestSaveReadsNoRevision(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	keep := uint64(1)
	for i, req := range []*core.SaveRequest{
		{SessionID: "s", StateJSON: `{"big":"state"}`, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"a"`}, {Role: "user", ContentJSON: `"b"`}}},
		{SessionID: "s", ExpectedRevision: 1, KeepMessages: &keep, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"c"`}}},
	} {
		if _, err := s.SaveCheckpoint(ctx, req); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	if err := s.update(func(t *tx) error { t.delete(revisionKey("s", 2)); return nil }); err != nil {
		t.Fatal(err)
	}
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"d"`}}})
	if err != nil || res.MessageCount != 3 {
		t.Fatalf("save over a removed revision: %+v %v", res, err)
	}
	msgs, err := s.Messages(ctx, "s", 3, 0, 1<<20, 0)
	if err != nil || len(msgs) != 3 || msgs[0].ContentJSON != `"a"` || msgs[1].ContentJSON != `"c"` || msgs[2].ContentJSON != `"d"` {
		t.Fatalf("history: %+v %v", msgs, err)
	}

	// A head whose segments disagree with its count is refused, not
	// trusted.
	if err := s.update(func(t *tx) error {
		h, err := mustHead(t, "s")
		if err != nil {
			return err
		}
		h.Segments = nil
		return put(t, sessionKey("s"), h)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3}); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("save over an inconsistent head: %v, want ErrCheckpointCorrupt", err)
	}
}

// TestTombstoneExpiry: a maintenance pass removes a tombstone once its
// retention has passed, and a writer of the deleted session stays fenced:
// its epoch is at or below the epoch floor, which also places every new
// session above it.
func TestTombstoneExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return now }, TombstoneRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Resume(ctx, "s", false) // epoch 2
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSession(ctx, "s", cp.Epoch); err != nil {
		t.Fatal(err)
	}

	now = now.Add(59 * time.Minute)
	if rep, err := s.Maintain(ctx, Retention{}); err != nil || rep.ExpiredTombstones != 0 {
		t.Fatalf("pass before the retention ends: %+v, %v", rep, err)
	}
	now = now.Add(2 * time.Minute)
	if rep, err := s.Maintain(ctx, Retention{}); err != nil || rep.ExpiredTombstones != 1 {
		t.Fatalf("pass after the retention: %+v, %v", rep, err)
	}
	if info, err := s.ExportInfo(ctx); err != nil || info.EpochFloor != cp.Epoch {
		t.Fatalf("epoch floor %d, %v; want the tombstone's epoch %d", info.EpochFloor, err, cp.Epoch)
	}
	if got := expiries(t, s); len(got) != 0 {
		t.Errorf("expiry entries left: %q", got)
	}
	err = s.view(ctx, func(t *tx) error {
		_, found, err := t.get(sessionKey("s"))
		if found {
			return errors.New("the tombstone is still there")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// The stale owner's create is fenced; a fresh create starts above it.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", Epoch: cp.Epoch}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("create at the expired tombstone's epoch: %v, want ErrSessionFenced", err)
	}
	for _, sid := range []string{"s", "new"} {
		res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid})
		if err != nil || res.Epoch != cp.Epoch+1 {
			t.Fatalf("create %s after the expiry: %+v %v, want epoch %d", sid, res, err, cp.Epoch+1)
		}
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: cp.Epoch}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("the stale owner's save to the re-created session: %v, want ErrSessionFenced", err)
	}

	// A session re-created before its old tombstone's entry comes due keeps
	// its head.
	if _, err := s.DeleteSession(ctx, "new", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "new"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if rep, err := s.Maintain(ctx, Retention{}); err != nil || rep.ExpiredTombstones != 0 {
		t.Fatalf("pass over a re-created session: %+v, %v", rep, err)
	}
	if _, err := s.Checkpoint(ctx, "new", 0); err != nil {
		t.Fatalf("the re-created session after the sweep: %v", err)
	}
}
