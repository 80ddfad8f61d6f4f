package badgerstore

import (
	"flag"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
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
	for _, req := range []*daemon.SaveRequest{
		{SessionID: "fixture-1", Task: "report", RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a01", AppendMessages: []daemon.Message{{Role: "user", ContentJSON: `"hello"`}}},
		{SessionID: "fixture-1", ExpectedRevision: 1, Turn: 1, RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a02", AppendMessages: []daemon.Message{{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"toolu_1","name":"write_report"}]`}},
			PendingToolUses: []daemon.ToolUse{{ID: "toolu_1", Name: "write_report", BeginTracked: true}}},
	} {
		if _, err := s.SaveCheckpoint(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BeginEffect(ctx, "fixture-1", "toolu_1", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "fixture-1", daemon.Effect{ToolUseID: "toolu_1", Output: "written"}); err != nil {
		t.Fatal(err)
	}
}
