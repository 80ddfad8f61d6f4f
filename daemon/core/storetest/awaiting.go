package storetest

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// checkAwaiting fails unless session id's count of calls waiting for
// approval, as Summary and ListSessions report it (the head's counter),
// equals the number of its ledger entries whose approval waits, and want.
func checkAwaiting(t *testing.T, s core.Store, id, step string, want int) {
	t.Helper()
	entries, err := s.Effects(ctx, id, "", 10000)
	if err != nil {
		t.Fatalf("%s: effects of %s: %v", step, id, err)
	}
	waiting := 0
	for _, e := range entries {
		if e.Approval != nil && e.Approval.Status == core.ApprovalWaiting {
			waiting++
		}
	}
	sum, err := s.Summary(ctx, id)
	if err != nil {
		t.Fatalf("%s: summary of %s: %v", step, id, err)
	}
	listed := summary(t, s, id)
	if int(sum.AwaitingApproval) != waiting || int(listed.AwaitingApproval) != waiting || waiting != want {
		t.Errorf("%s: session %s counts %d waiting (Summary), %d (ListSessions); its ledger holds %d waiting, want %d",
			step, id, sum.AwaitingApproval, listed.AwaitingApproval, waiting, want)
	}
}

// testAwaitingCount: the sessions' count of calls waiting for approval, a
// counter kept on the head beside the ledger, equals the ledger's count of
// waiting entries after every kind of step that can change either: a begin
// that asks and one that spends, a decision and its replay by request id,
// a denial, a refusal recorded while waiting, saves that drop and bring
// back a waiting call, a rewind, a fork, a completion and a reopen, a new
// input after a decision, and a delete and re-create.
func testAwaitingCount(t *testing.T, s core.Store) {
	approvalSession(t, s, "s")
	checkAwaiting(t, s, "s", "created", 0)
	begin := func(id, tool string, epoch uint64, rid string, want core.Decision) {
		t.Helper()
		b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: id, ToolUseID: tool, Epoch: epoch, RequiresApproval: true, RequestID: rid})
		if err != nil || b.Decision != want {
			t.Fatalf("begin %s/%s: %+v %v, want decision %v", id, tool, b, err, want)
		}
	}
	begin("s", "pay", 0, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "a begin asked", 1)
	begin("s", "pay", 0, "", core.DecisionAwaitApproval)
	begin("s", "pay", 0, "00000000-0000-4000-8000-0000000000b1", core.DecisionAwaitApproval)
	begin("s", "pay", 0, "00000000-0000-4000-8000-0000000000b1", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "begins asked again, one by request id twice", 1)
	approve := approveReq("s", "pay", core.ApprovalApproved)
	approve.RequestID = "00000000-0000-4000-8000-0000000000b2"
	for range 2 {
		if _, err := s.ApproveEffect(ctx, approve); err != nil {
			t.Fatal(err)
		}
		checkAwaiting(t, s, "s", "approved, then the approval's replay", 0)
	}
	begin("s", "pay", 0, "00000000-0000-4000-8000-0000000000b3", core.DecisionRun)
	begin("s", "pay", 0, "00000000-0000-4000-8000-0000000000b3", core.DecisionRun)
	checkAwaiting(t, s, "s", "a begin spent the approval, and its replay", 0)
	if res, err := s.ApproveEffect(ctx, approve); err != nil || res.Entry.Approval == nil || !res.Entry.Approval.Spent {
		t.Fatalf("the approval's replay after the begin: %+v %v", res, err)
	}
	checkAwaiting(t, s, "s", "the approval replayed after the begin spent it", 0)
	// The process dies after the begin; a new one resumes and replays from
	// the revision the call was pending in: the same begin, nothing waits.
	crashed := resume(t, s, "s")
	if _, err := s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Epoch: crashed, Revision: 2}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", Epoch: crashed, RequiresApproval: true}); err != nil ||
		b.Decision != core.DecisionRun || !b.AlreadyBegun {
		t.Fatalf("begin after the crash and the replay: %+v %v", b, err)
	}
	checkAwaiting(t, s, "s", "resumed after a crash and replayed from an older revision", 0)
	begin("s", "mail", crashed, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "a second call asked", 1)
	if _, err := s.ApproveEffect(ctx, approveReq("s", "mail", core.ApprovalDenied)); err != nil {
		t.Fatal(err)
	}
	begin("s", "mail", crashed, "", core.DecisionDenied)
	checkAwaiting(t, s, "s", "denied, and begun after the denial", 0)

	// A call waiting that the next turn's save drops, then a rewind that
	// makes it pending again, and a begin of it then.
	save(t, s, &core.SaveRequest{SessionID: "s", Epoch: crashed, ExpectedRevision: 3, PendingToolUses: []core.ToolUse{
		{ID: "w", Name: "transfer", InputJSON: `{"n":1}`, BeginTracked: true}}})
	begin("s", "w", crashed, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "a call of revision 3 asked", 1)
	save(t, s, &core.SaveRequest{SessionID: "s", Epoch: crashed, ExpectedRevision: 4})
	checkAwaiting(t, s, "s", "a save dropped the waiting call", 1)
	if _, err := s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Epoch: crashed, Revision: 4}); err != nil {
		t.Fatal(err)
	}
	begin("s", "w", crashed, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "a rewind made it pending again, and a begin asked again", 1)
	// The same call saved pending with other input asks for that input.
	save(t, s, &core.SaveRequest{SessionID: "s", Epoch: crashed, ExpectedRevision: 6, PendingToolUses: []core.ToolUse{
		{ID: "w", Name: "transfer", InputJSON: `{"n":2}`, BeginTracked: true}}})
	begin("s", "w", crashed, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "the waiting call asked again with other input", 1)

	// A fork: its copy of the waiting call asks again in the fork.
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"}); err != nil {
		t.Fatal(err)
	}
	checkAwaiting(t, s, "f", "forked", 0)
	checkAwaiting(t, s, "s", "the fork's source", 1)
	begin("f", "w", 0, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "f", "the fork's copy asked", 1)

	// A completion and a reopen, then a new run.
	complete(t, s, &core.CompleteRequest{SessionID: "s", Epoch: crashed, Status: core.StatusCompleted})
	checkAwaiting(t, s, "s", "completed", 1)
	cp, err := s.Resume(ctx, "s", true)
	if err != nil {
		t.Fatal(err)
	}
	checkAwaiting(t, s, "s", "reopened", 1)
	if _, err := s.ApproveEffect(ctx, approveReq("s", "w", core.ApprovalApproved)); err != nil {
		t.Fatal(err)
	}
	begin("s", "w", cp.Epoch, "", core.DecisionRun)
	checkAwaiting(t, s, "s", "approved and begun after the reopen", 0)

	// A call decided before any begin asked, whose input then changes.
	save(t, s, &core.SaveRequest{SessionID: "s", Epoch: cp.Epoch, ExpectedRevision: 7, PendingToolUses: []core.ToolUse{
		{ID: "p", Name: "transfer", InputJSON: `{"n":3}`, BeginTracked: true}}})
	if _, err := s.ApproveEffect(ctx, approveReq("s", "p", core.ApprovalApproved)); err != nil {
		t.Fatal(err)
	}
	checkAwaiting(t, s, "s", "approved before a begin asked", 0)
	save(t, s, &core.SaveRequest{SessionID: "s", Epoch: cp.Epoch, ExpectedRevision: 8, PendingToolUses: []core.ToolUse{
		{ID: "p", Name: "transfer", InputJSON: `{"n":4}`, BeginTracked: true}}})
	begin("s", "p", cp.Epoch, "", core.DecisionAwaitApproval)
	checkAwaiting(t, s, "s", "begun with other input than approved", 1)

	// A registered call waiting, answered with a refusal.
	reg := &core.RegisterRequest{SessionID: "s", Epoch: cp.Epoch, ToolUse: core.ToolUse{ID: "h", Name: "transfer", InputJSON: `{"n":5}`}, RequiresApproval: true}
	if b, err := s.RegisterEffect(ctx, reg); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("register: %+v %v", b, err)
	}
	checkAwaiting(t, s, "s", "a registered call asked", 2)
	rec := core.Effect{ToolUseID: "h", Output: "gave up", Refused: true, RequestID: "00000000-0000-4000-8000-0000000000b4"}
	for range 2 {
		if _, _, err := s.RecordEffect(ctx, "s", rec); err != nil {
			t.Fatal(err)
		}
		checkAwaiting(t, s, "s", "a refusal recorded while waiting, and its replay", 1)
	}

	// A delete and a re-create at the same id start from none.
	if _, err := s.DeleteSession(ctx, "s", cp.Epoch); err != nil {
		t.Fatal(err)
	}
	create(t, s, "s")
	checkAwaiting(t, s, "s", "deleted and created again", 0)
}
