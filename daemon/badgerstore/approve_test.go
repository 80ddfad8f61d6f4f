package badgerstore

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestApprovalSpentAcrossReopen: the begin that spends an approval is one
// durable write with the begin marker, so after the store is closed and
// opened again (a daemon restart after a crash) a begin of the same call is
// the same begin (its key, already begun), and the approval stays spent.
func TestApprovalSpentAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", PendingToolUses: []core.ToolUse{
		{ID: "pay", Name: "send_payment", InputJSON: `{"cents":5}`, BeginTracked: true},
	}}); err != nil {
		t.Fatal(err)
	}
	begin := &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}
	if b, err := s.BeginEffect(ctx, begin); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("begin: %+v %v", b, err)
	}
	if _, err := s.ApproveEffect(ctx, &core.ApproveRequest{SessionID: "s", ToolUseID: "pay", Decision: core.ApprovalApproved}); err != nil {
		t.Fatal(err)
	}
	b, err := s.BeginEffect(ctx, begin)
	if err != nil || b.Decision != core.DecisionRun || b.AlreadyBegun {
		t.Fatalf("begin with the approval: %+v %v", b, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	defer s.Close()
	again, err := s.BeginEffect(ctx, begin)
	if err != nil || again.Decision != core.DecisionRun || !again.AlreadyBegun || again.IdempotencyKey != b.IdempotencyKey ||
		again.Approval == nil || !again.Approval.Spent {
		t.Fatalf("begin after reopening: %+v %v", again, err)
	}
	if sum, err := s.Summary(ctx, "s"); err != nil || sum.AwaitingApproval != 0 {
		t.Fatalf("summary: %+v %v", sum, err)
	}
}
