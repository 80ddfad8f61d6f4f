package graphtest

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The thread ledger's duplicate-intent guard (docs/api.md "The thread
// ledger"): a call begun by run r2 with the same name and input as a call
// an earlier run r1 began from a graph checkpoint that was never saved, no
// newer checkpoint of the namespace saved since but r2's own, is not run.

var (
	dupReuse   = savepointv1.Decision_DECISION_REUSE
	dupInDoubt = savepointv1.Decision_DECISION_IN_DOUBT
	dupRun     = savepointv1.Decision_DECISION_RUN
	stBegun    = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN
)

func beginRun(t *testing.T, e *Env, c effectCall, run string, repeatable bool) *savepointv1.BeginThreadEffectResponse {
	t.Helper()
	req := beginReq(c)
	req.RunId, req.Repeatable = run, repeatable
	res, err := e.Graph.BeginThreadEffect(ctx, req)
	if err != nil {
		t.Fatalf("BeginThreadEffect %+v run %s: %v", c, run, err)
	}
	return res
}

func payment(thread, id, checkpoint, input string) effectCall {
	return effectCall{thread: thread, id: id, name: "send_payment", input: input, checkpoint: checkpoint}
}

// wantDuplicate checks that res caught the call as the duplicate of
// earlier, answered with decision d.
func wantDuplicate(t *testing.T, res *savepointv1.BeginThreadEffectResponse, d savepointv1.Decision, earlier string) {
	t.Helper()
	dup := res.GetDuplicateOf()
	if res.GetDecision() != d || dup.GetToolUseId() != earlier || res.GetEffect().GetAttempts() != 0 ||
		res.GetEffect().GetDuplicateOf() != earlier || res.GetEffect().GetIdempotencyKey() != "" ||
		!strings.Contains(res.GetToolResultText(), "tool_use_id "+earlier+" ") {
		t.Fatalf("begin answered %v, duplicate of %q, entry %v, text %q; want %v, duplicate of %q",
			res.GetDecision(), dup.GetToolUseId(), res.GetEffect(), res.GetToolResultText(), d, earlier)
	}
}

// testThreadEffectDuplicate: the reissued call is caught (REUSE with the
// earlier output), again and by request id; the crashed run itself, a
// repeatable or read-only call, a call without a run id and another input
// run.
func testThreadEffectDuplicate(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "01", "", "", nil))
	// Run r1 begins a payment from checkpoint 02, records it, and dies
	// before 02 (holding the model's message) is saved.
	a := beginRun(t, e, payment("t", "a", "02", `{"to":"bob","amount":5}`), "r1", false)
	wantDecision(t, a, dupRun, 1, stBegun)
	record(t, e, "t", "", "a", 1, `"paid"`, false)
	// Run r2 resumes from 01; the model reissues the call under a new id,
	// from checkpoint 03, which async durability may have saved already.
	mustPut(t, e, cp("t", "", "03", "01", "", nil))
	b := beginRun(t, e, payment("t", "b", "03", `{"amount": 5, "to": "bob"}`), "r2", false)
	wantDuplicate(t, b, dupReuse, "a")
	if string(b.GetDuplicateOf().GetOutput().GetData()) != `"paid"` || b.GetDuplicateOf().GetIdempotencyKey() != a.GetEffect().GetIdempotencyKey() {
		t.Fatalf("earlier call as answered: %v", b.GetDuplicateOf())
	}
	// Again, and by request id, and its replay: the same answer.
	wantDuplicate(t, beginRun(t, e, payment("t", "b", "03", `{"to":"bob","amount":5}`), "r2", false), dupReuse, "a")
	c := payment("t", "c", "03", `{"to":"bob","amount":5}`)
	c.requestID = "6f1c2a9e-1d4b-4f8a-9c3e-0a1b2c3d4e5f"
	wantDuplicate(t, beginRun(t, e, c, "r2", false), dupReuse, "a")
	wantDuplicate(t, beginRun(t, e, c, "r2", false), dupReuse, "a")
	// A caught call never ran: it cannot be recorded or resolved.
	_, err := e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "b", 1, `"paid"`, false))
	wantReason(t, err, codes.FailedPrecondition, "EFFECT_NOT_BEGUN", "")
	_, err = e.Graph.ResolveThreadEffect(ctx, resolveReq("t", "b", done, `"paid"`))
	wantReason(t, err, codes.FailedPrecondition, "CALL_NOT_IN_DOUBT", "")

	// Not caught: the crashed run's own calls (an uncrashed run calling the
	// same tool twice), a repeatable call, a read-only one, a call without a
	// run id, another input.
	ro := payment("t", "g", "03", `{"to":"bob","amount":5}`)
	ro.class = savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY
	for _, tc := range []struct {
		c          effectCall
		run        string
		repeatable bool
	}{
		{payment("t", "d", "02", `{"to":"bob","amount":5}`), "r1", false},
		{payment("t", "e", "07", `{"to":"bob","amount":5}`), "r1", false},
		{payment("t", "f", "03", `{"to":"bob","amount":5}`), "r2", true},
		{ro, "r2", false},
		{payment("t", "h", "03", `{"to":"bob","amount":5}`), "", false},
		{payment("t", "i", "03", `{"to":"bob","amount":6}`), "r2", false},
	} {
		res := beginRun(t, e, tc.c, tc.run, tc.repeatable)
		if res.GetDecision() != dupRun || res.GetDuplicateOf() != nil || res.GetEffect().GetAttempts() != 1 {
			t.Fatalf("%s (run %q): %v", tc.c.id, tc.run, res)
		}
	}
	// The ledger lists the caught calls with the call they repeat.
	dups := map[string]string{}
	for _, eff := range threadEffects(t, e, "t", 0) {
		if eff.GetDuplicateOf() != "" {
			dups[eff.GetToolUseId()] = eff.GetDuplicateOf()
		}
		if eff.GetToolUseId() == "a" && eff.GetRunId() != "r1" {
			t.Fatalf("run id of a: %q", eff.GetRunId())
		}
	}
	if len(dups) != 2 || dups["b"] != "a" || dups["c"] != "a" {
		t.Fatalf("duplicates listed: %v", dups)
	}
	// Bad input gets its reason.
	for _, run := range []string{strings.Repeat("r", 257), "r\x00"} {
		req := beginReq(payment("t", "j", "03", `{}`))
		req.RunId = run
		_, err := e.Graph.BeginThreadEffect(ctx, req)
		wantReason(t, err, codes.InvalidArgument, "INVALID_ARGUMENT", "run_id")
	}
}

// testThreadEffectDuplicateWindow: an earlier call in doubt is named
// (IN_DOUBT), and once resolved its output is; a call whose checkpoint was
// saved, or past which a newer checkpoint was saved, is no lost turn's.
func testThreadEffectDuplicateWindow(t *testing.T, e *Env) {
	mustPut(t, e, cp("u", "", "01", "", "", nil))
	beginRun(t, e, payment("u", "a", "02", `{"amount":5}`), "r1", false)
	b := beginRun(t, e, payment("u", "b", "03", `{"amount":5}`), "r2", false)
	wantDuplicate(t, b, dupInDoubt, "a")
	if b.GetDuplicateOf().GetState() != stBegun || !strings.Contains(b.GetToolResultText(), "unknown") {
		t.Fatalf("in-doubt duplicate: %v %q", b.GetDuplicateOf(), b.GetToolResultText())
	}
	resolve(t, e, resolveReq("u", "a", done, `"found"`))
	b = beginRun(t, e, payment("u", "b", "03", `{"amount":5}`), "r2", false)
	wantDuplicate(t, b, dupReuse, "a")
	if string(b.GetDuplicateOf().GetOutput().GetData()) != `"found"` {
		t.Fatalf("after resolving a: %v", b.GetDuplicateOf())
	}

	// The earlier call's checkpoint was saved: its message was not lost.
	mustPut(t, e, cp("v", "", "02", "", "", nil))
	beginRun(t, e, payment("v", "a", "02", `{"amount":5}`), "r1", false)
	if res := beginRun(t, e, payment("v", "b", "03", `{"amount":5}`), "r2", false); res.GetDecision() != dupRun || res.GetDuplicateOf() != nil {
		t.Fatalf("earlier checkpoint saved: %v", res)
	}
	// A newer checkpoint than the earlier call's was saved: the new run got
	// past that turn.
	mustPut(t, e, cp("w", "", "01", "", "", nil))
	beginRun(t, e, payment("w", "a", "02", `{"amount":5}`), "r1", false)
	mustPut(t, e, cp("w", "", "04", "01", "", nil))
	if res := beginRun(t, e, payment("w", "b", "05", `{"amount":5}`), "r2", false); res.GetDecision() != dupRun || res.GetDuplicateOf() != nil {
		t.Fatalf("window closed: %v", res)
	}
	// Another namespace is another ledger.
	mustPut(t, e, cp("x", "", "01", "", "", nil))
	beginRun(t, e, payment("x", "a", "02", `{"amount":5}`), "r1", false)
	sub := payment("x", "b", "03", `{"amount":5}`)
	sub.ns = "child:1"
	if res := beginRun(t, e, sub, "r2", false); res.GetDecision() != dupRun || res.GetDuplicateOf() != nil {
		t.Fatalf("other namespace: %v", res)
	}
}
