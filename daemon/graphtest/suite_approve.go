package graphtest

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ApproveThreadEffect: a thread's call that requires approval starts its
// first attempt only against an approval for its input, spent once.

var (
	approved = savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	denied   = savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED
	notBegun = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_NOT_BEGUN
)

func approvalBegin(t *testing.T, e *Env, c effectCall) *savepointv1.BeginThreadEffectResponse {
	t.Helper()
	r := beginReq(c)
	r.RequiresApproval = true
	res, err := e.Graph.BeginThreadEffect(ctx, r)
	if err != nil {
		t.Fatalf("BeginThreadEffect %+v: %v", c, err)
	}
	return res
}

func approveThread(t *testing.T, e *Env, r *savepointv1.ApproveThreadEffectRequest) *savepointv1.ApproveThreadEffectResponse {
	t.Helper()
	res, err := e.Graph.ApproveThreadEffect(ctx, r)
	if err != nil {
		t.Fatalf("ApproveThreadEffect %v: %v", r, err)
	}
	return res
}

// testThreadEffectApproveOnce: the begin waits, a person approves, the
// begin starts attempt 1 and spends the approval; after a restart of the
// daemon a replayed begin of the same call is in doubt (the same attempt,
// the same key), never a second attempt; a new call with the same input
// waits for its own approval.
func testThreadEffectApproveOnce(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "call_1", name: "send_payment", input: `{"amount": 5}`}
	w := approvalBegin(t, e, call)
	wantDecision(t, w, savepointv1.Decision_DECISION_AWAIT_APPROVAL, 0, notBegun)
	a := w.GetEffect().GetApproval()
	if a.GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING || !bytes.Equal(a.GetInputDigest(), w.GetEffect().GetInputDigest()) ||
		a.GetRequestTime() == nil || w.GetEffect().GetIdempotencyKey() != "" {
		t.Fatalf("waiting: %v", w.GetEffect())
	}
	wantDecision(t, approvalBegin(t, e, call), savepointv1.Decision_DECISION_AWAIT_APPROVAL, 0, notBegun)
	_, err := e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "call_1", 1, `"paid"`, false))
	wantReason(t, err, codes.FailedPrecondition, "EFFECT_NOT_BEGUN", "")
	req := &savepointv1.ApproveThreadEffectRequest{ThreadId: "t", ToolUseId: "call_1", Decision: approved, DecidedBy: "alice", Note: "fine",
		InputDigest: a.GetInputDigest(), RequestId: "8a1f7a3c-4b2e-4c9d-9f1e-2d3c4b5a6f71"}
	res := approveThread(t, e, req)
	if res.GetAlreadyDecided() || res.GetEffect().GetApproval().GetStatus() != approved || res.GetEffect().GetApproval().GetDecidedBy() != "alice" {
		t.Fatalf("approve: %v", res)
	}
	if again := approveThread(t, e, req); again.GetAlreadyDecided() || again.GetEffect().GetApproval().GetStatus() != approved {
		t.Fatalf("retry of the request: %v", again)
	}
	req.RequestId = ""
	if again := approveThread(t, e, req); !again.GetAlreadyDecided() {
		t.Fatalf("the same decision again: %v", again)
	}
	req.Decision = denied
	_, err = e.Graph.ApproveThreadEffect(ctx, req)
	wantReason(t, err, codes.AlreadyExists, "APPROVAL_CONFLICT", "")
	run := approvalBegin(t, e, call)
	wantDecision(t, run, savepointv1.Decision_DECISION_RUN, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	key := run.GetEffect().GetIdempotencyKey()
	if key == "" || !run.GetEffect().GetApproval().GetSpent() {
		t.Fatalf("run: %v", run.GetEffect())
	}
	// The process dies after the begin; the daemon restarts too.
	if e.Restart != nil {
		e = e.Restart(t)
	}
	again := approvalBegin(t, e, call)
	wantDecision(t, again, savepointv1.Decision_DECISION_IN_DOUBT, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	if again.GetEffect().GetIdempotencyKey() != key {
		t.Fatalf("replayed begin: %v", again.GetEffect())
	}
	wantDecision(t, approvalBegin(t, e, effectCall{thread: "t", id: "call_2", name: "send_payment", input: `{"amount":5}`}),
		savepointv1.Decision_DECISION_AWAIT_APPROVAL, 0, notBegun)
}

// testThreadEffectApproveDeny: a denial is a decision carrying the note;
// later begins answer it again and start nothing.
func testThreadEffectApproveDeny(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "call_1", name: "delete_repo", input: `{"repo":"x"}`}
	approvalBegin(t, e, call)
	approveThread(t, e, &savepointv1.ApproveThreadEffectRequest{ThreadId: "t", ToolUseId: "call_1", Decision: denied, Note: "never"})
	for range 2 {
		d := approvalBegin(t, e, call)
		wantDecision(t, d, savepointv1.Decision_DECISION_DENIED, 0, notBegun)
		if d.GetEffect().GetApproval().GetNote() != "never" {
			t.Fatalf("denied: %v", d.GetEffect())
		}
	}
	// Even a begin that does not say the call requires approval.
	d, err := e.Graph.BeginThreadEffect(ctx, beginReq(call))
	if err != nil || d.GetDecision() != savepointv1.Decision_DECISION_DENIED {
		t.Fatalf("begin without requires_approval: %v %v", d, err)
	}
}

// testThreadEffectApproveRefused: an approval for other input, of a call
// never begun, of one begun without approval, and malformed requests are
// refused and write nothing.
func testThreadEffectApproveRefused(t *testing.T, e *Env) {
	approvalBegin(t, e, effectCall{thread: "t", id: "wait", name: "pay", input: `{"n":1}`})
	begin(t, e, effectCall{thread: "t", id: "plain", name: "pay"})
	base := func(id string) *savepointv1.ApproveThreadEffectRequest {
		return &savepointv1.ApproveThreadEffectRequest{ThreadId: "t", ToolUseId: id, Decision: approved}
	}
	other := base("wait")
	other.InputDigest = bytes.Repeat([]byte{1}, 32)
	_, err := e.Graph.ApproveThreadEffect(ctx, other)
	wantReason(t, err, codes.FailedPrecondition, "APPROVAL_INPUT_MISMATCH", "")
	_, err = e.Graph.ApproveThreadEffect(ctx, base("plain"))
	wantReason(t, err, codes.FailedPrecondition, "APPROVAL_NOT_WAITING", "")
	_, err = e.Graph.ApproveThreadEffect(ctx, base("never"))
	wantReason(t, err, codes.NotFound, "CALL_UNKNOWN", "")
	for _, tc := range []struct {
		name   string
		edit   func(r *savepointv1.ApproveThreadEffectRequest)
		reason string
		field  string
	}{
		{"no thread", func(r *savepointv1.ApproveThreadEffectRequest) { r.ThreadId = "" }, "INVALID_GRAPH_KEY", "thread_id"},
		{"no decision", func(r *savepointv1.ApproveThreadEffectRequest) { r.Decision = 0 }, "MISSING_FIELD", "decision"},
		{"waiting is no decision", func(r *savepointv1.ApproveThreadEffectRequest) {
			r.Decision = savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING
		}, "INVALID_APPROVAL", "decision"},
		{"short digest", func(r *savepointv1.ApproveThreadEffectRequest) { r.InputDigest = []byte{1} }, "INVALID_APPROVAL", "input_digest"},
		{"long note", func(r *savepointv1.ApproveThreadEffectRequest) { r.Note = string(make([]byte, 4097)) }, "FIELD_TOO_LARGE", "note"},
		{"bad request id", func(r *savepointv1.ApproveThreadEffectRequest) { r.RequestId = "x" }, "INVALID_REQUEST_ID", "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base("wait")
			tc.edit(r)
			_, err := e.Graph.ApproveThreadEffect(ctx, r)
			wantReason(t, err, codes.InvalidArgument, tc.reason, tc.field)
		})
	}
	for _, x := range threadEffects(t, e, "t", 0) {
		if x.GetToolUseId() == "wait" && x.GetApproval().GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
			t.Fatalf("a refused decision was stored: %v", x)
		}
	}
}
