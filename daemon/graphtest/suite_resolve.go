package graphtest

import (
	"testing"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ResolveThreadEffect: a person or a verify hook settles a thread's call in
// doubt.

var (
	done    = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE
	notDone = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE
	person  = savepointv1.ResolverKind_RESOLVER_KIND_PERSON
)

func resolveReq(thread, id string, outcome savepointv1.ResolutionOutcome, out string) *savepointv1.ResolveThreadEffectRequest {
	r := &savepointv1.ResolveThreadEffectRequest{ThreadId: thread, ToolUseId: id, Outcome: outcome, ResolverKind: person, ResolvedBy: "alice"}
	if out != "" {
		r.Output = value("json", out)
	}
	return r
}

func resolve(t *testing.T, e *Env, r *savepointv1.ResolveThreadEffectRequest) *savepointv1.ResolveThreadEffectResponse {
	t.Helper()
	res, err := e.Graph.ResolveThreadEffect(ctx, r)
	if err != nil {
		t.Fatalf("ResolveThreadEffect %v: %v", r, err)
	}
	return res
}

// testThreadEffectResolveDone: a call in doubt resolved DONE is reused, its
// output the one found; the same finding again is accepted, another is a
// conflict, and a record of another outcome is refused.
func testThreadEffectResolveDone(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "call_1", name: "send_email", input: `{"to": "a@b.c"}`}
	key := begin(t, e, call).GetEffect().GetIdempotencyKey()
	wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_IN_DOUBT, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	req := resolveReq("t", "call_1", done, `"sent"`)
	req.Note, req.RequestId = "mail log", "8a1f7a3c-4b2e-4c9d-9f1e-2d3c4b5a6f70"
	res := resolve(t, e, req)
	eff := res.GetEffect()
	if res.GetAlreadyResolved() || eff.GetState() != savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED || string(eff.GetOutput().GetData()) != `"sent"` ||
		eff.GetResolution().GetResolvedBy() != "alice" || eff.GetResolution().GetNote() != "mail log" || eff.GetResolution().GetResolveTime() == nil ||
		eff.GetRecordTime() == nil || len(eff.GetOutputDigest()) != 32 {
		t.Fatalf("resolve: %v", res)
	}
	if again := resolve(t, e, req); again.GetAlreadyResolved() || again.GetEffect().GetResolution().GetResolvedBy() != "alice" {
		t.Fatalf("retry of the request: %v", again) // answered as the first
	}
	reuse := begin(t, e, call)
	wantDecision(t, reuse, savepointv1.Decision_DECISION_REUSE, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
	if string(reuse.GetEffect().GetOutput().GetData()) != `"sent"` || reuse.GetEffect().GetIdempotencyKey() != key || reuse.GetEffect().GetResolution() == nil {
		t.Fatalf("reuse: %v", reuse.GetEffect())
	}
	same := resolveReq("t", "call_1", done, `"sent"`)
	same.ResolvedBy = "bob"
	if r := resolve(t, e, same); !r.GetAlreadyResolved() || r.GetEffect().GetResolution().GetResolvedBy() != "alice" {
		t.Fatalf("the same finding again: %v", r)
	}
	_, err := e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "call_1", done, `"other"`))
	wantReason(t, err, codes.AlreadyExists, "RESOLUTION_CONFLICT", "")
	_, err = e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "call_1", notDone, ""))
	wantReason(t, err, codes.AlreadyExists, "RESOLUTION_CONFLICT", "")
	_, err = e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "call_1", 1, `"other"`, false))
	wantReason(t, err, codes.AlreadyExists, "EFFECT_CONFLICT", "")
	if got := threadEffects(t, e, "t", 0); len(got) != 1 || got[0].GetResolution().GetResolvedBy() != "alice" || string(got[0].GetOutput().GetData()) != `"sent"` {
		t.Fatalf("ledger: %v", got)
	}
}

// testThreadEffectResolveNotDone: a call resolved NOT_DONE is run again as
// a new attempt under the same key; once that attempt is begun the
// resolution is spent, and the call, unrecorded, is in doubt again.
func testThreadEffectResolveNotDone(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "call_1", name: "charge", input: `{"cents": 5}`}
	key := begin(t, e, call).GetEffect().GetIdempotencyKey()
	res := resolve(t, e, resolveReq("t", "call_1", notDone, ""))
	if res.GetEffect().GetState() != savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN || res.GetEffect().GetResolution().GetOutcome() != notDone {
		t.Fatalf("resolve NOT_DONE: %v", res)
	}
	_, err := e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "call_1", done, `"x"`))
	wantReason(t, err, codes.AlreadyExists, "RESOLUTION_CONFLICT", "")
	run := begin(t, e, call)
	wantDecision(t, run, savepointv1.Decision_DECISION_RUN, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	if run.GetEffect().GetIdempotencyKey() != key || !run.GetEffect().GetResolution().GetRetryBegun() {
		t.Fatalf("the new attempt: %v", run.GetEffect())
	}
	wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_IN_DOUBT, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	// In doubt again: a new resolution replaces the spent one.
	again := resolveReq("t", "call_1", done, `"charged"`)
	again.ResolvedBy = "bob"
	if r := resolve(t, e, again); r.GetAlreadyResolved() || r.GetEffect().GetResolution().GetResolvedBy() != "bob" || r.GetEffect().GetAttempts() != 2 {
		t.Fatalf("second resolution: %v", r)
	}
	wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_REUSE, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
}

// testThreadEffectResolveRefused: calls not in doubt, calls never begun and
// malformed requests are refused, and write nothing.
func testThreadEffectResolveRefused(t *testing.T, e *Env) {
	begin(t, e, effectCall{thread: "t", id: "read", name: "get", class: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY})
	begin(t, e, effectCall{thread: "t", id: "done", name: "send"})
	record(t, e, "t", "", "done", 1, `"sent"`, false)
	begin(t, e, effectCall{thread: "t", id: "doubt", name: "send"})
	_, err := e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "read", done, `"x"`))
	wantReason(t, err, codes.FailedPrecondition, "CALL_NOT_IN_DOUBT", "")
	_, err = e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "done", done, `"x"`))
	wantReason(t, err, codes.FailedPrecondition, "CALL_NOT_IN_DOUBT", "")
	_, err = e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "never", done, `"x"`))
	wantReason(t, err, codes.NotFound, "CALL_UNKNOWN", "")
	for _, tc := range []struct {
		name   string
		edit   func(r *savepointv1.ResolveThreadEffectRequest)
		reason string
		field  string
	}{
		{"no thread", func(r *savepointv1.ResolveThreadEffectRequest) { r.ThreadId = "" }, "INVALID_GRAPH_KEY", "thread_id"},
		{"no tool use id", func(r *savepointv1.ResolveThreadEffectRequest) { r.ToolUseId = "" }, "INVALID_GRAPH_KEY", "tool_use_id"},
		{"no outcome", func(r *savepointv1.ResolveThreadEffectRequest) { r.Outcome = 0 }, "MISSING_FIELD", "outcome"},
		{"unknown outcome", func(r *savepointv1.ResolveThreadEffectRequest) { r.Outcome = 7 }, "INVALID_RESOLUTION", "outcome"},
		{"no resolver kind", func(r *savepointv1.ResolveThreadEffectRequest) { r.ResolverKind = 0 }, "MISSING_FIELD", "resolver_kind"},
		{"unknown resolver kind", func(r *savepointv1.ResolveThreadEffectRequest) { r.ResolverKind = 7 }, "INVALID_RESOLUTION", "resolver_kind"},
		{"DONE without output", func(r *savepointv1.ResolveThreadEffectRequest) { r.Output = nil }, "MISSING_FIELD", "output"},
		{"NOT_DONE with output", func(r *savepointv1.ResolveThreadEffectRequest) { r.Outcome = notDone }, "INVALID_RESOLUTION", "output"},
		{"NOT_DONE with is_error", func(r *savepointv1.ResolveThreadEffectRequest) { r.Outcome, r.Output, r.IsError = notDone, nil, true }, "INVALID_RESOLUTION", "is_error"},
		{"long note", func(r *savepointv1.ResolveThreadEffectRequest) { r.Note = string(make([]byte, 4097)) }, "FIELD_TOO_LARGE", "note"},
		{"bad request id", func(r *savepointv1.ResolveThreadEffectRequest) { r.RequestId = "x" }, "INVALID_REQUEST_ID", "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resolveReq("t", "doubt", done, `"x"`)
			tc.edit(r)
			_, err := e.Graph.ResolveThreadEffect(ctx, r)
			wantReason(t, err, codes.InvalidArgument, tc.reason, tc.field)
		})
	}
	for _, x := range threadEffects(t, e, "t", 0) {
		if x.GetResolution() != nil {
			t.Fatalf("a refused resolution was stored: %v", x)
		}
	}
}
