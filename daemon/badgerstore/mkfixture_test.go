package badgerstore

import (
	"flag"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

var fixtureDir = flag.String("write-fixture", "", "write a data directory in the current format to this path")

func TestWriteFixture(t *testing.T) {
	if *fixtureDir == "" {
		t.Skip("only with -write-fixture DIR")
	}
	s, err := Open(*fixtureDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, req := range []*core.SaveRequest{
		{SessionID: "fixture-1", Task: "report", RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a01", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hello"`}}},
		{SessionID: "fixture-1", ExpectedRevision: 1, Turn: 1, RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a02", AppendMessages: []core.Message{{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"toolu_1","name":"write_report"}]`}},
			PendingToolUses: []core.ToolUse{{ID: "toolu_1", Name: "write_report", BeginTracked: true}}},
	} {
		if _, err := s.SaveCheckpoint(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "fixture-1", ToolUseID: "toolu_1", Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "fixture-1", core.Effect{ToolUseID: "toolu_1", Output: "written"}); err != nil {
		t.Fatal(err)
	}
	// fixture-2: a history of two segments (a save that kept one message of
	// two, then appended), at epoch 2.
	keep := uint64(1)
	for _, req := range []*core.SaveRequest{
		{SessionID: "fixture-2", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"a"`}, {Role: "assistant", ContentJSON: `"b"`}}},
		{SessionID: "fixture-2", ExpectedRevision: 1, KeepMessages: &keep, AppendMessages: []core.Message{{Role: "assistant", ContentJSON: `"c"`}}},
	} {
		if _, err := s.SaveCheckpoint(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Resume(ctx, "fixture-2", false); err != nil {
		t.Fatal(err)
	}
	// fixture-3: deleted at epoch 1, its records purged.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "fixture-3", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSession(ctx, "fixture-3", 0); err != nil {
		t.Fatal(err)
	}
	// fixture-4: a delete interrupted before its purge, at epoch 1.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "fixture-4", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"y"`}}}); err != nil {
		t.Fatal(err)
	}
	if err := interruptDelete(s, "fixture-4"); err != nil {
		t.Fatal(err)
	}
}

// interruptDelete writes sid's tombstone and purge record as DeleteSession
// does, without purging its records: what a crash between the two leaves.
// (Format 3 marked the tombstone purging instead of a purge record.)
func interruptDelete(s *Store, sid string) error {
	return s.update(func(t *tx) error {
		if err := put(t, purgeKey(sid), &storagev1.PurgeRecord{Epoch: 1}); err != nil {
			return err
		}
		return put(t, sessionKey(sid), &storagev1.SessionRecord{Deleted: true, Epoch: 1})
	})
}
