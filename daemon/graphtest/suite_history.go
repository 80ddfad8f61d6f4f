package graphtest

import (
	"fmt"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// testThreadEffectHistory: a call resolved NOT_DONE, run again under its
// key, fallen in doubt again and resolved again keeps every resolution of
// its attempts, oldest first with their authors, in resolutions (the last
// being resolution), across a restart; a request id's replay adds none;
// approvals lists the decision made on an approval-gated call.
func testThreadEffectHistory(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "call_1", name: "send_email", input: `{"to": "a@b.c"}`}
	begin(t, e, call)
	for i, by := range []string{"alice", "bob"} {
		req := resolveReq("t", "call_1", notDone, "")
		req.ResolvedBy, req.Note, req.RequestId = by, "looked "+by, fmt.Sprintf("8a1f7a3c-4b2e-4c9d-9f1e-2d3c4b5a6e%02d", i)
		resolve(t, e, req)
		resolve(t, e, req) // a replay
		wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_RUN, uint32(i+2), savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	}
	last := resolveReq("t", "call_1", done, `"sent"`)
	last.ResolvedBy = "carol"
	resolve(t, e, last)
	check := func(when string, e *Env) {
		t.Helper()
		got := threadEffects(t, e, "t", 0)
		if len(got) != 1 {
			t.Fatalf("%s: ledger %v", when, got)
		}
		var who string
		for _, r := range got[0].GetResolutions() {
			who += fmt.Sprintf("%s:%s:%v ", r.GetResolvedBy(), r.GetOutcome(), r.GetResolveTime() != nil)
		}
		want := "alice:RESOLUTION_OUTCOME_NOT_DONE:true bob:RESOLUTION_OUTCOME_NOT_DONE:true carol:RESOLUTION_OUTCOME_DONE:true "
		if who != want || got[0].GetResolutions()[0].GetNote() != "looked alice" || got[0].GetResolution().GetResolvedBy() != "carol" {
			t.Fatalf("%s: resolutions %q, want %q (%v)", when, who, want, got[0])
		}
	}
	check("after three resolutions", e)
	if e.Restart != nil {
		e = e.Restart(t)
		check("after a restart", e)
	}

	gated := effectCall{thread: "t", id: "call_2", name: "pay", input: `{"n":1}`}
	approvalBegin(t, e, gated)
	if got := threadEffects(t, e, "t", 0); len(got[1].GetApprovals()) != 0 {
		t.Fatalf("approvals while waiting: %v", got[1])
	}
	approveThread(t, e, &savepointv1.ApproveThreadEffectRequest{ThreadId: "t", ToolUseId: "call_2", Decision: denied, DecidedBy: "dan", Note: "no"})
	if got := threadEffects(t, e, "t", 0); len(got[1].GetApprovals()) != 1 || got[1].GetApprovals()[0].GetDecidedBy() != "dan" ||
		got[1].GetApprovals()[0].GetStatus() != denied {
		t.Fatalf("approvals after the denial: %v", got[1])
	}
}
