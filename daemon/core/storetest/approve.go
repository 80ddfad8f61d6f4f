package storetest

import (
	"bytes"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// approvalSession creates session id with one pending side-effecting call
// "pay" ({"amount":5}, begin-tracked) and returns its input digest.
func approvalSession(t *testing.T, s core.Store, id string) []byte {
	t.Helper()
	create(t, s, id)
	save(t, s, &core.SaveRequest{SessionID: id, ExpectedRevision: 1, PendingToolUses: []core.ToolUse{
		{ID: "pay", Name: "send_payment", InputJSON: `{"amount": 5}`, BeginTracked: true},
		{ID: "mail", Name: "send_email", InputJSON: `{"to":"a"}`, BeginTracked: true},
	}})
	d, err := core.ThreadEffectDigest("send_payment", `{"amount":5}`)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func approveReq(id, tool string, decision core.ApprovalStatus) *core.ApproveRequest {
	return &core.ApproveRequest{SessionID: id, ToolUseID: tool, Decision: decision, DecidedBy: "alice", Note: "ok"}
}

// testApproveOnce: a call that requires approval waits until one exists
// for its input, and the begin spends it in the same write: a resumed run
// and a replay from an older revision find the call begun (the same begin,
// the same key), never a second spend.
func testApproveOnce(t *testing.T, s core.Store) {
	digest := approvalSession(t, s, "s")
	begin := &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}
	b, err := s.BeginEffect(ctx, begin)
	if err != nil || b.Decision != core.DecisionAwaitApproval || b.IdempotencyKey != "" || b.Approval == nil ||
		b.Approval.Status != core.ApprovalWaiting || !bytes.Equal(b.Approval.InputDigest, digest) || b.Approval.RequestTime.IsZero() {
		t.Fatalf("begin without approval: %+v %v", b, err)
	}
	// Asking again changes nothing; the session counts one call waiting and
	// the ledger lists it.
	if b, err := s.BeginEffect(ctx, begin); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("begin again: %+v %v", b, err)
	}
	if sum, err := s.Summary(ctx, "s"); err != nil || sum.AwaitingApproval != 1 {
		t.Fatalf("summary while waiting: %+v %v", sum, err)
	}
	entries, err := s.Effects(ctx, "s", "", 10)
	if err != nil || len(entries) != 1 || entries[0].ToolUseID != "pay" || entries[0].Begun || entries[0].Approval == nil {
		t.Fatalf("effects while waiting: %+v %v", entries, err)
	}
	if d := decisions(t, s, "s")["pay"]; d.Decision != core.DecisionRun {
		t.Fatalf("reconcile while waiting: %+v", d)
	}
	// A person approves (no epoch: not fenced), for the input as it waits.
	res, err := s.ApproveEffect(ctx, approveReq("s", "pay", core.ApprovalApproved))
	if err != nil || res.AlreadyDecided || res.Entry.Approval == nil || res.Entry.Approval.Status != core.ApprovalApproved ||
		res.Entry.Approval.DecidedBy != "alice" || res.Entry.Approval.DecideTime.IsZero() || res.Entry.Approval.Spent {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.AwaitingApproval != 0 {
		t.Fatalf("summary after the decision: %+v", sum)
	}
	if res, err := s.ApproveEffect(ctx, approveReq("s", "pay", core.ApprovalApproved)); err != nil || !res.AlreadyDecided {
		t.Fatalf("the same decision again: %+v %v", res, err)
	}
	_, err = s.ApproveEffect(ctx, approveReq("s", "pay", core.ApprovalDenied))
	wantState(t, err, core.ErrApprovalConflict, 2, 1)
	b, err = s.BeginEffect(ctx, begin)
	if err != nil || b.Decision != core.DecisionRun || b.IdempotencyKey == "" || b.AlreadyBegun || b.Approval == nil || !b.Approval.Spent {
		t.Fatalf("begin with the approval: %+v %v", b, err)
	}
	key := b.IdempotencyKey
	// The process dies after BeginEffect; a new one resumes: the call is in
	// doubt (begun, unrecorded), and a begin of it is the same begin.
	cp, err := s.Resume(ctx, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(t, s, "s")["pay"]; d.Decision != core.DecisionInDoubt {
		t.Fatalf("reconcile after the crash: %+v", d)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", Epoch: cp.Epoch, RequiresApproval: true}); err != nil ||
		b.Decision != core.DecisionRun || !b.AlreadyBegun || b.IdempotencyKey != key {
		t.Fatalf("begin after the crash: %+v %v", b, err)
	}
	// The tool ran once and is recorded; a replay from the older revision
	// reuses it.
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "pay", Output: "paid"}); err != nil {
		t.Fatal(err)
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: cp.Epoch})
	if _, err := s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Epoch: cp.Epoch, Revision: 2}); err != nil {
		t.Fatal(err)
	}
	if d := decisions(t, s, "s")["pay"]; d.Decision != core.DecisionReuse || d.ToolUse.Effect.Output != "paid" {
		t.Fatalf("reconcile after the replay: %+v", d)
	}
	// A new call with the same input needs a new approval.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 4, Epoch: cp.Epoch, PendingToolUses: []core.ToolUse{
		{ID: "pay2", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
	}})
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay2", Epoch: cp.Epoch, RequiresApproval: true}); err != nil ||
		b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("a new call with the same input: %+v %v", b, err)
	}
}

// testApproveDeny: a denial is a decision, not an error, and carries the
// approver's note; it unlocks nothing, even for a begin that does not say
// the call requires approval.
func testApproveDeny(t *testing.T, s core.Store) {
	approvalSession(t, s, "s")
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("begin: %+v %v", b, err)
	}
	deny := approveReq("s", "pay", core.ApprovalDenied)
	deny.Note = "not this month"
	if _, err := s.ApproveEffect(ctx, deny); err != nil {
		t.Fatal(err)
	}
	for _, requires := range []bool{true, false} {
		b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: requires})
		if err != nil || b.Decision != core.DecisionDenied || b.IdempotencyKey != "" || b.Approval == nil || b.Approval.Note != "not this month" {
			t.Fatalf("begin after the denial (requires %v): %+v %v", requires, b, err)
		}
	}
	_, err := s.ApproveEffect(ctx, approveReq("s", "pay", core.ApprovalApproved))
	wantState(t, err, core.ErrApprovalConflict, 2, 1)
	// A call approved before any begin asked: decided for its saved input.
	res, err := s.ApproveEffect(ctx, approveReq("s", "mail", core.ApprovalApproved))
	if err != nil || res.Entry.Approval == nil || !res.Entry.Approval.RequestTime.IsZero() {
		t.Fatalf("approve before a begin: %+v %v", res, err)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "mail", RequiresApproval: true}); err != nil || b.Decision != core.DecisionRun {
		t.Fatalf("begin of a call approved before: %+v %v", b, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.AwaitingApproval != 0 {
		t.Fatalf("summary: %+v", sum)
	}
}

// testApproveOtherInput: an approval binds the input digest. A decision
// for a digest the call does not have is refused; a registered call begun
// with other input than the one approved waits again.
func testApproveOtherInput(t *testing.T, s core.Store) {
	digest := approvalSession(t, s, "s")
	other := bytes.Repeat([]byte{7}, 32)
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("begin: %+v %v", b, err)
	}
	req := approveReq("s", "pay", core.ApprovalApproved)
	req.InputDigest = other
	_, err := s.ApproveEffect(ctx, req)
	wantState(t, err, core.ErrApprovalInputMismatch, 2, 1)
	req.InputDigest = digest
	if _, err := s.ApproveEffect(ctx, req); err != nil {
		t.Fatal(err)
	}
	// A registered call (hooks) approved for {"n":1} and begun with {"n":2}.
	reg := &core.RegisterRequest{SessionID: "s", ToolUse: core.ToolUse{ID: "h1", Name: "transfer", InputJSON: `{"n":1}`}, RequiresApproval: true}
	if b, err := s.RegisterEffect(ctx, reg); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("register: %+v %v", b, err)
	}
	if _, err := s.ApproveEffect(ctx, approveReq("s", "h1", core.ApprovalApproved)); err != nil {
		t.Fatal(err)
	}
	reg2 := *reg
	reg2.ToolUse.InputJSON = `{"n":2}`
	b, err := s.RegisterEffect(ctx, &reg2)
	if err != nil || b.Decision != core.DecisionAwaitApproval || b.IdempotencyKey != "" {
		t.Fatalf("register with other input: %+v %v", b, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.AwaitingApproval != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	// A call waiting that the agent answers with a refusal waits no more.
	if b, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: core.ToolUse{ID: "h2", Name: "transfer", InputJSON: `{"n":3}`},
		RequiresApproval: true}); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("register h2: %+v %v", b, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.AwaitingApproval != 2 {
		t.Fatalf("summary with h2 waiting: %+v", sum)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "h2", Output: "gave up waiting", Refused: true}); err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.AwaitingApproval != 1 {
		t.Fatalf("summary after h2's refusal: %+v", sum)
	}
	_, err = s.ApproveEffect(ctx, approveReq("s", "h2", core.ApprovalApproved))
	wantState(t, err, core.ErrApprovalNotWaiting, 2, 1)
	// Approved for {"n":2} now, it runs; with a request id, a retry of the
	// begin is answered the same.
	if _, err := s.ApproveEffect(ctx, approveReq("s", "h1", core.ApprovalApproved)); err != nil {
		t.Fatal(err)
	}
	reg2.RequestID = "00000000-0000-4000-8000-0000000000a1"
	b, err = s.RegisterEffect(ctx, &reg2)
	if err != nil || b.Decision != core.DecisionRun || b.IdempotencyKey == "" {
		t.Fatalf("register approved: %+v %v", b, err)
	}
	if b2, err := s.RegisterEffect(ctx, &reg2); err != nil || b2.IdempotencyKey != b.IdempotencyKey || b2.Decision != core.DecisionRun {
		t.Fatalf("register retried: %+v %v", b2, err)
	}
}

// testApproveRefused: bad targets get their reasons and change nothing;
// the owner's decision is fenced, a person's is not; request ids replay.
func testApproveRefused(t *testing.T, s core.Store) {
	approvalSession(t, s, "s")
	_, err := s.ApproveEffect(ctx, approveReq("nope", "pay", core.ApprovalApproved))
	wantErr(t, err, core.ErrSessionNotFound)
	_, err = s.ApproveEffect(ctx, approveReq("s", "never", core.ApprovalApproved))
	wantErr(t, err, core.ErrCallUnknown)
	// Begun without approval: nothing to decide.
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "mail"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.ApproveEffect(ctx, approveReq("s", "mail", core.ApprovalApproved))
	wantState(t, err, core.ErrApprovalNotWaiting, 2, 1)
	// Fencing: after a Resume, the old owner's epoch is refused.
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Resume(ctx, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	req := approveReq("s", "pay", core.ApprovalApproved)
	req.Epoch = epochOf(cp.Epoch - 1)
	_, err = s.ApproveEffect(ctx, req)
	wantState(t, err, core.ErrSessionFenced, 2, cp.Epoch)
	entries, _ := s.Effects(ctx, "s", "", 10)
	for _, e := range entries {
		if e.ToolUseID == "pay" && (e.Approval == nil || e.Approval.Status != core.ApprovalWaiting) {
			t.Fatalf("a refused decision was stored: %+v", e.Approval)
		}
	}
	// With a request id: a retry answers from the record; the id for
	// another decision is refused.
	req.Epoch = epochOf(cp.Epoch)
	req.RequestID = "00000000-0000-4000-8000-0000000000b1"
	if _, err := s.ApproveEffect(ctx, req); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApproveEffect(ctx, req)
	if err != nil || res.AlreadyDecided || res.Entry.Approval.Status != core.ApprovalApproved {
		t.Fatalf("retry: %+v %v", res, err)
	}
	other := *req
	other.Decision = core.ApprovalDenied
	_, err = s.ApproveEffect(ctx, &other)
	wantErr(t, err, core.ErrRequestIDReused)
}

// testApproveFork: a fork's copy of a call asks again; an unspent approval
// is never spent twice, once in each session.
func testApproveFork(t *testing.T, s core.Store) {
	approvalSession(t, s, "s")
	if _, err := s.ApproveEffect(ctx, approveReq("s", "pay", core.ApprovalApproved)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "f", ToolUseID: "pay", RequiresApproval: true}); err != nil || b.Decision != core.DecisionAwaitApproval {
		t.Fatalf("begin in the fork: %+v %v", b, err)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}); err != nil || b.Decision != core.DecisionRun {
		t.Fatalf("begin in the source: %+v %v", b, err)
	}
}
