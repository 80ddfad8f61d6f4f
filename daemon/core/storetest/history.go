package storetest

import (
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// entry returns session id's ledger entry of tool, as Effects lists it.
func entry(t *testing.T, s core.Store, id, tool string) core.LedgerEntry {
	t.Helper()
	es, err := s.Effects(ctx, id, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.ToolUseID == tool {
			return e
		}
	}
	t.Fatalf("Effects of %s does not list %s: %+v", id, tool, es)
	return core.LedgerEntry{}
}

// resolvers is who made each resolution kept of e, oldest first, as
// "by:OUTCOME".
func resolvers(e core.LedgerEntry) string {
	var s string
	for _, r := range core.AllResolutions(e.EarlierResolutions, e.Resolution) {
		s += fmt.Sprintf("%s:%s ", r.ResolvedBy, r.Outcome)
	}
	return s
}

// approvers is who made each approval decision kept of e, oldest first,
// as "by:STATUS".
func approvers(e core.LedgerEntry) string {
	var s string
	for _, a := range core.AllApprovals(e.EarlierApprovals, e.Approval) {
		s += fmt.Sprintf("%s:%s ", a.DecidedBy, a.Status)
	}
	return s
}

// testResolutionHistory: a call resolved NOT_DONE, re-run under its key,
// fallen in doubt again and resolved again keeps every resolution, in
// order, with its author; a request id's replay adds none; at most
// MaxDecisions are kept, the latest.
func testResolutionHistory(t *testing.T, s core.Store) {
	inDoubtSession(t, s, "s")
	resolve := func(by string, outcome core.ResolutionOutcome, rid string) {
		t.Helper()
		req := &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: outcome, ResolverKind: core.ResolverPerson, ResolvedBy: by, Note: "n-" + by, RequestID: rid}
		if outcome == core.ResolvedDone {
			req.Output = "paid"
		}
		if _, err := s.ResolveEffect(ctx, req); err != nil {
			t.Fatalf("resolve by %s: %v", by, err)
		}
	}
	want := ""
	for i := range core.MaxDecisions + 2 {
		by := fmt.Sprintf("p%d", i)
		rid := fmt.Sprintf("00000000-0000-4000-8000-%012d", 100+i)
		resolve(by, core.ResolvedNotDone, rid)
		resolve(by, core.ResolvedNotDone, rid) // a replay
		want += by + ":NOT_DONE "
		if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w"}); err != nil || b.Decision != core.DecisionRun {
			t.Fatalf("begin after resolution %d: %+v %v", i, b, err)
		}
		if i == 1 {
			if got := resolvers(entry(t, s, "s", "w")); got != want {
				t.Fatalf("after two resolutions: %q, want %q", got, want)
			}
			e := entry(t, s, "s", "w")
			if r := e.EarlierResolutions[0]; r.Note != "n-p0" || r.ResolverKind != core.ResolverPerson || r.ResolveTime.IsZero() || !r.RetryBegun {
				t.Fatalf("the first resolution as kept: %+v", r)
			}
		}
	}
	resolve("last", core.ResolvedDone, "")
	e := entry(t, s, "s", "w")
	all := core.AllResolutions(e.EarlierResolutions, e.Resolution)
	if len(all) != core.MaxDecisions || all[0].ResolvedBy != "p3" || all[len(all)-1].ResolvedBy != "last" || e.Effect == nil {
		t.Fatalf("after %d resolutions: %q (%d kept), want the latest %d, p3 to last", core.MaxDecisions+3, resolvers(e), len(all), core.MaxDecisions)
	}
}

// testApprovalHistory: a call decided for one input, then saved pending
// with other input and decided again, keeps both decisions with their
// authors; a begin spending an approval and a request id's replay add
// none.
func testApprovalHistory(t *testing.T, s core.Store) {
	create(t, s, "s")
	pending := func(rev uint64, input string) {
		t.Helper()
		save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, PendingToolUses: []core.ToolUse{
			{ID: "x", Name: "transfer", InputJSON: input, BeginTracked: true}}})
	}
	begin := func(want core.Decision) {
		t.Helper()
		if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "x", RequiresApproval: true}); err != nil || b.Decision != want {
			t.Fatalf("begin: %+v %v, want %v", b, err, want)
		}
	}
	decide := func(by string, d core.ApprovalStatus, rid string) {
		t.Helper()
		req := approveReq("s", "x", d)
		req.DecidedBy, req.RequestID = by, rid
		if _, err := s.ApproveEffect(ctx, req); err != nil {
			t.Fatalf("decision by %s: %v", by, err)
		}
	}
	pending(1, `{"n":1}`)
	begin(core.DecisionAwaitApproval)
	decide("alice", core.ApprovalDenied, "00000000-0000-4000-8000-0000000000c1")
	decide("alice", core.ApprovalDenied, "00000000-0000-4000-8000-0000000000c1")
	if got := approvers(entry(t, s, "s", "x")); got != "alice:DENIED " {
		t.Fatalf("after a denial and its replay: %q", got)
	}
	// The model asks again with other input: a new decision, the denial kept.
	pending(2, `{"n":2}`)
	begin(core.DecisionAwaitApproval)
	e := entry(t, s, "s", "x")
	if got := approvers(e); got != "alice:DENIED " || e.Approval == nil || e.Approval.Status != core.ApprovalWaiting {
		t.Fatalf("waiting again for other input: %q %+v", got, e.Approval)
	}
	decide("bob", core.ApprovalApproved, "")
	begin(core.DecisionRun)
	e = entry(t, s, "s", "x")
	if got := approvers(e); got != "alice:DENIED bob:APPROVED " || !e.Approval.Spent || e.EarlierApprovals[0].Note != "ok" || e.EarlierApprovals[0].DecideTime.IsZero() {
		t.Fatalf("approved for the new input and begun: %q %+v", got, e)
	}
}
