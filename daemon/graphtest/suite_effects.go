package graphtest

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The graph-thread ledger: BeginThreadEffect, RecordThreadEffect and
// ListThreadEffects, and what the thread's delete, copy and prune do to it.

type effectCall struct {
	thread, ns, id, name, input string
	class                       savepointv1.EffectClass
	checkpoint, requestID       string
}

func begin(t *testing.T, e *Env, c effectCall) *savepointv1.BeginThreadEffectResponse {
	t.Helper()
	res, err := e.Graph.BeginThreadEffect(ctx, beginReq(c))
	if err != nil {
		t.Fatalf("BeginThreadEffect %+v: %v", c, err)
	}
	return res
}

func beginReq(c effectCall) *savepointv1.BeginThreadEffectRequest {
	return &savepointv1.BeginThreadEffectRequest{ThreadId: c.thread, CheckpointNs: c.ns, ToolUseId: c.id, Name: c.name,
		InputJson: c.input, EffectClass: c.class, CheckpointId: c.checkpoint, RequestId: c.requestID}
}

func record(t *testing.T, e *Env, thread, ns, id string, attempt uint32, out string, isError bool) *savepointv1.RecordThreadEffectResponse {
	t.Helper()
	res, err := e.Graph.RecordThreadEffect(ctx, recordReq(thread, ns, id, attempt, out, isError))
	if err != nil {
		t.Fatalf("RecordThreadEffect %s/%q/%s attempt %d: %v", thread, ns, id, attempt, err)
	}
	return res
}

func recordReq(thread, ns, id string, attempt uint32, out string, isError bool) *savepointv1.RecordThreadEffectRequest {
	return &savepointv1.RecordThreadEffectRequest{ThreadId: thread, CheckpointNs: ns, ToolUseId: id, Attempt: attempt,
		Output: value("json", out), IsError: isError}
}

func wantDecision(t *testing.T, res *savepointv1.BeginThreadEffectResponse, d savepointv1.Decision, attempts uint32, state savepointv1.ThreadEffectState) {
	t.Helper()
	if res.GetDecision() != d || res.GetEffect().GetAttempts() != attempts || res.GetEffect().GetState() != state || res.GetDroppedLate() {
		t.Fatalf("begin answered %v, attempts %d, state %v, dropped_late %v; want %v, %d, %v",
			res.GetDecision(), res.GetEffect().GetAttempts(), res.GetEffect().GetState(), res.GetDroppedLate(), d, attempts, state)
	}
}

// threadEffects pages through a thread's ledger with pageSize.
func threadEffects(t *testing.T, e *Env, thread string, pageSize int32) []*savepointv1.ThreadEffect {
	t.Helper()
	var out []*savepointv1.ThreadEffect
	for token, pages := "", 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("ListThreadEffects never ends")
		}
		resp, err := e.Graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: thread, PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("ListThreadEffects %s: %v", thread, err)
		}
		if pageSize > 0 && len(resp.GetEffects()) > int(pageSize) {
			t.Fatalf("a page of %d entries, asked for %d", len(resp.GetEffects()), pageSize)
		}
		out = append(out, resp.GetEffects()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

func effectKeys(es []*savepointv1.ThreadEffect) []string {
	var out []string
	for _, x := range es {
		out = append(out, fmt.Sprintf("%s/%s:%v", x.GetCheckpointNs(), x.GetToolUseId(), x.GetState()))
	}
	return out
}

// testThreadEffectSideEffect walks a side-effecting call through the
// seed's three answers: RUN, IN_DOUBT while begun without an outcome,
// REUSE once its result is recorded; recording the same result again
// changes nothing and another result is refused.
func testThreadEffectSideEffect(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "1", "", "{}", nil))
	call := effectCall{thread: "t", id: "call_1", name: "send_email", input: `{"to": "a@b.c", "n": 1}`, checkpoint: "1"}
	first := begin(t, e, call)
	wantDecision(t, first, savepointv1.Decision_DECISION_RUN, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	key := first.GetEffect().GetIdempotencyKey()
	if key == "" || len(first.GetEffect().GetInputDigest()) != 32 || first.GetEffect().GetEffectClass() != savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT ||
		first.GetEffect().GetBeginTime() == nil || first.GetEffect().GetCheckpointId() != "1" || first.GetEffect().GetOutput() != nil {
		t.Fatalf("first begin's entry: %v", first.GetEffect())
	}
	// The same call again, its input written otherwise: in doubt.
	again := call
	again.input = `{"n":1,"to":"a@b.c"}`
	wantDecision(t, begin(t, e, again), savepointv1.Decision_DECISION_IN_DOUBT, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)

	rec := record(t, e, "t", "", "call_1", 1, `"sent"`, false)
	if rec.GetAlreadyRecorded() || rec.GetEffect().GetState() != savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED ||
		string(rec.GetEffect().GetOutput().GetData()) != `"sent"` || len(rec.GetEffect().GetOutputDigest()) != 32 || rec.GetEffect().GetRecordTime() == nil {
		t.Fatalf("record: %v", rec)
	}
	reuse := begin(t, e, call)
	wantDecision(t, reuse, savepointv1.Decision_DECISION_REUSE, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
	if string(reuse.GetEffect().GetOutput().GetData()) != `"sent"` || reuse.GetEffect().GetIdempotencyKey() != key {
		t.Fatalf("reuse: %v", reuse.GetEffect())
	}
	if res := record(t, e, "t", "", "call_1", 1, `"sent"`, false); !res.GetAlreadyRecorded() {
		t.Fatalf("the same record again: %v", res)
	}
	_, err := e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "call_1", 1, `"other"`, false))
	wantReason(t, err, codes.AlreadyExists, "EFFECT_CONFLICT", "")
	_, err = e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "call_1", 1, `"sent"`, true))
	wantReason(t, err, codes.AlreadyExists, "EFFECT_CONFLICT", "")
	if got := threadEffects(t, e, "t", 0); len(got) != 1 || string(got[0].GetOutput().GetData()) != `"sent"` || got[0].GetInputJson() != call.input {
		t.Fatalf("ledger after a refused record: %v", got)
	}
}

// testThreadEffectAttempts checks re-runs: a read-only or idempotent call
// begun without an outcome and any call whose attempt failed begin a new
// attempt under the same idempotency key, and only the latest attempt can
// be recorded.
func testThreadEffectAttempts(t *testing.T, e *Env) {
	for _, class := range []savepointv1.EffectClass{savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY, savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT} {
		id := "call_" + class.String()
		call := effectCall{thread: "t", id: id, name: "fetch", input: `{}`, class: class}
		first := begin(t, e, call)
		second := begin(t, e, call)
		wantDecision(t, second, savepointv1.Decision_DECISION_RUN, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
		if second.GetEffect().GetIdempotencyKey() != first.GetEffect().GetIdempotencyKey() {
			t.Fatalf("%v: the second attempt's idempotency key differs", class)
		}
		_, err := e.Graph.RecordThreadEffect(ctx, recordReq("t", "", id, 1, `"old"`, false))
		wantReason(t, err, codes.FailedPrecondition, "EFFECT_NOT_BEGUN", "")
		record(t, e, "t", "", id, 2, `"new"`, false)
		wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_REUSE, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
	}
	// A side-effecting call that raised is not in doubt: it ran and failed.
	call := effectCall{thread: "t", id: "pay", name: "pay", input: `{"amount":5}`}
	first := begin(t, e, call)
	failed := record(t, e, "t", "", "pay", 1, `"card declined"`, true)
	if failed.GetEffect().GetState() != savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED {
		t.Fatalf("a failed attempt: %v", failed.GetEffect())
	}
	retry := begin(t, e, call)
	wantDecision(t, retry, savepointv1.Decision_DECISION_RUN, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	if retry.GetEffect().GetIdempotencyKey() != first.GetEffect().GetIdempotencyKey() || retry.GetEffect().GetOutput() != nil {
		t.Fatalf("the retry's entry: %v", retry.GetEffect())
	}
	wantDecision(t, begin(t, e, call), savepointv1.Decision_DECISION_IN_DOUBT, 2, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	_, err := e.Graph.RecordThreadEffect(ctx, recordReq("t", "", "never", 1, `"x"`, false))
	wantReason(t, err, codes.FailedPrecondition, "EFFECT_NOT_BEGUN", "")
}

// testThreadEffectKeys checks what keys an entry: the namespace separates
// calls, and a reused tool use id with another name or input is refused,
// naming the field, and changes nothing.
func testThreadEffectKeys(t *testing.T, e *Env) {
	root := effectCall{thread: "t", id: "call_0", name: "search", input: `{"q":"a"}`}
	child := root
	child.ns = "child:1"
	child.input = `{"q":"b"}`
	begin(t, e, root)
	wantDecision(t, begin(t, e, child), savepointv1.Decision_DECISION_RUN, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	other := root
	other.input = `{"q":"c"}`
	_, err := e.Graph.BeginThreadEffect(ctx, beginReq(other))
	wantReason(t, err, codes.FailedPrecondition, "EFFECT_INPUT_MISMATCH", "input_json")
	other = root
	other.name = "lookup"
	_, err = e.Graph.BeginThreadEffect(ctx, beginReq(other))
	wantReason(t, err, codes.FailedPrecondition, "EFFECT_INPUT_MISMATCH", "name")
	empty := effectCall{thread: "t", id: "call_e", name: "now"}
	begin(t, e, empty)
	empty.input = "{ }"
	wantDecision(t, begin(t, e, empty), savepointv1.Decision_DECISION_IN_DOUBT, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	got := threadEffects(t, e, "t", 0)
	if want := []string{"/call_0:THREAD_EFFECT_STATE_BEGUN", "/call_e:THREAD_EFFECT_STATE_BEGUN", "child:1/call_0:THREAD_EFFECT_STATE_BEGUN"}; fmt.Sprint(effectKeys(got)) != fmt.Sprint(want) {
		t.Fatalf("ledger %v, want %v", effectKeys(got), want)
	}
	if got[0].GetInputJson() != `{"q":"a"}` || got[1].GetInputJson() != "{}" {
		t.Fatalf("inputs %q and %q, want the first begin's", got[0].GetInputJson(), got[1].GetInputJson())
	}
}

// testThreadEffectRequestID checks AIP-155 retries: a begin retried with
// its request id answers RUN for the attempt it started, not IN_DOUBT, and
// starts nothing; the id with another payload is refused.
func testThreadEffectRequestID(t *testing.T, e *Env) {
	call := effectCall{thread: "t", id: "c", name: "pay", input: `{}`, requestID: "0b9f8a52-4a0d-4c55-9d7e-8e5f1c7f0a11"}
	first := begin(t, e, call)
	retry := begin(t, e, call)
	wantDecision(t, retry, savepointv1.Decision_DECISION_RUN, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)
	if retry.GetEffect().GetIdempotencyKey() != first.GetEffect().GetIdempotencyKey() {
		t.Fatal("the retry answered another idempotency key")
	}
	other := call
	other.id = "d"
	_, err := e.Graph.BeginThreadEffect(ctx, beginReq(other))
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED", "")
	rec := recordReq("t", "", "c", 1, `"ok"`, false)
	rec.RequestId = "5e0c6a0e-9a9b-4a56-8f0e-0d9b3f1f6c22"
	for range 2 {
		if _, err := e.Graph.RecordThreadEffect(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	rec.Output = value("json", `"changed"`)
	_, err = e.Graph.RecordThreadEffect(ctx, rec)
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED", "")
	if got := threadEffects(t, e, "t", 0); len(got) != 1 || got[0].GetAttempts() != 1 {
		t.Fatalf("ledger after retries: %v", got)
	}
}

// testThreadEffectList checks paging: every entry once, in (namespace,
// tool use id) order, over pages of any size; a token is bound to its
// thread.
func testThreadEffectList(t *testing.T, e *Env) {
	var want []string
	for _, ns := range []string{"", "a", "b"} {
		for i := range 4 {
			id := fmt.Sprintf("call_%d", i)
			begin(t, e, effectCall{thread: "t", ns: ns, id: id, name: "f"})
			want = append(want, fmt.Sprintf("%s/%s:THREAD_EFFECT_STATE_BEGUN", ns, id))
		}
	}
	begin(t, e, effectCall{thread: "t2", id: "x", name: "f"})
	for _, size := range []int32{0, 1, 5, 12, 1000} {
		if got := effectKeys(threadEffects(t, e, "t", size)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("page size %d: %v, want %v", size, got, want)
		}
	}
	resp, err := e.Graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: "t", PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: "t2", PageToken: resp.GetNextPageToken()})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN", "")
	if got := threadEffects(t, e, "none", 0); len(got) != 0 {
		t.Fatalf("a thread without a ledger lists %v", got)
	}
}

// testThreadEffectLifecycle checks that the ledger lives with its thread:
// DeleteThread removes it (and a begin or record for a checkpoint the
// delete removed is dropped late), CopyThread copies it (the copy reuses
// what happened and knows what is in doubt), Prune with KEEP_LATEST keeps
// it and Prune with DELETE removes it; and that it survives a restart.
func testThreadEffectLifecycle(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "1", "", "{}", nil))
	done := effectCall{thread: "t", id: "done", name: "pay", input: `{"a":1}`, checkpoint: "1"}
	doubt := effectCall{thread: "t", id: "doubt", name: "pay", input: `{"a":2}`, checkpoint: "1"}
	begin(t, e, done)
	record(t, e, "t", "", "done", 1, `"paid"`, false)
	begin(t, e, doubt)

	if _, err := e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "t", TargetThreadId: "fork"}); err != nil {
		t.Fatal(err)
	}
	forked := done
	forked.thread = "fork"
	wantDecision(t, begin(t, e, forked), savepointv1.Decision_DECISION_REUSE, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
	forkedDoubt := doubt
	forkedDoubt.thread = "fork"
	wantDecision(t, begin(t, e, forkedDoubt), savepointv1.Decision_DECISION_IN_DOUBT, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)

	mustPut(t, e, cp("t", "", "2", "1", "{}", nil))
	if _, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"t"}, Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST}); err != nil {
		t.Fatal(err)
	}
	if got := threadEffects(t, e, "t", 0); len(got) != 2 {
		t.Fatalf("after a KEEP_LATEST prune the ledger holds %v", effectKeys(got))
	}
	if e.Restart != nil {
		e = e.Restart(t)
		wantDecision(t, begin(t, e, done), savepointv1.Decision_DECISION_REUSE, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED)
	}

	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := threadEffects(t, e, "t", 0); len(got) != 0 {
		t.Fatalf("after DeleteThread the ledger holds %v", effectKeys(got))
	}
	// A process still running the deleted thread's task: dropped.
	late := begin(t, e, done)
	if !late.GetDroppedLate() || late.GetDecision() != savepointv1.Decision_DECISION_RUN || late.GetEffect() != nil {
		t.Fatalf("a begin for a deleted checkpoint: %v", late)
	}
	if res := record(t, e, "t", "", "doubt", 1, `"paid"`, false); !res.GetDroppedLate() {
		t.Fatalf("a record for a deleted thread: %v", res)
	}
	if got := threadEffects(t, e, "t", 0); len(got) != 0 {
		t.Fatalf("late writes left %v", effectKeys(got))
	}
	// The thread used again from a new checkpoint: a fresh ledger.
	mustPut(t, e, cp("t", "", "3", "", "{}", nil))
	fresh := done
	fresh.checkpoint = "3"
	wantDecision(t, begin(t, e, fresh), savepointv1.Decision_DECISION_RUN, 1, savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN)

	if _, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"fork"}, Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_DELETE}); err != nil {
		t.Fatal(err)
	}
	if got := threadEffects(t, e, "fork", 0); len(got) != 0 {
		t.Fatalf("after a DELETE prune the ledger holds %v", effectKeys(got))
	}
	records(t, e) // Verify reads every entry and finds no damage
}

// testThreadEffectBadInput checks that malformed calls are refused with
// their reason and field, and write nothing.
func testThreadEffectBadInput(t *testing.T, e *Env) {
	ok := effectCall{thread: "t", id: "c", name: "f", input: "{}"}
	for _, tc := range []struct {
		name   string
		edit   func(r *savepointv1.BeginThreadEffectRequest)
		code   codes.Code
		reason string
		field  string
	}{
		{"no thread", func(r *savepointv1.BeginThreadEffectRequest) { r.ThreadId = "" }, codes.InvalidArgument, "INVALID_GRAPH_KEY", "thread_id"},
		{"no tool use id", func(r *savepointv1.BeginThreadEffectRequest) { r.ToolUseId = "" }, codes.InvalidArgument, "INVALID_GRAPH_KEY", "tool_use_id"},
		{"NUL in the namespace", func(r *savepointv1.BeginThreadEffectRequest) { r.CheckpointNs = "a\x00b" }, codes.InvalidArgument, "INVALID_GRAPH_KEY", "checkpoint_ns"},
		{"long tool use id", func(r *savepointv1.BeginThreadEffectRequest) { r.ToolUseId = string(make([]byte, 257)) }, codes.InvalidArgument, "INVALID_GRAPH_KEY", "tool_use_id"},
		{"no name", func(r *savepointv1.BeginThreadEffectRequest) { r.Name = "" }, codes.InvalidArgument, "MISSING_FIELD", "name"},
		{"bad JSON", func(r *savepointv1.BeginThreadEffectRequest) { r.InputJson = "{" }, codes.InvalidArgument, "INVALID_JSON", "input_json"},
		{"bad class", func(r *savepointv1.BeginThreadEffectRequest) { r.EffectClass = 99 }, codes.InvalidArgument, "INVALID_EFFECT_CLASS", "effect_class"},
		{"bad request id", func(r *savepointv1.BeginThreadEffectRequest) { r.RequestId = "x" }, codes.InvalidArgument, "INVALID_REQUEST_ID", "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := beginReq(ok)
			tc.edit(r)
			_, err := e.Graph.BeginThreadEffect(ctx, r)
			wantReason(t, err, tc.code, tc.reason, tc.field)
		})
	}
	begin(t, e, ok)
	for _, tc := range []struct {
		name   string
		edit   func(r *savepointv1.RecordThreadEffectRequest)
		reason string
		field  string
	}{
		{"no attempt", func(r *savepointv1.RecordThreadEffectRequest) { r.Attempt = 0 }, "MISSING_FIELD", "attempt"},
		{"no output", func(r *savepointv1.RecordThreadEffectRequest) { r.Output = nil }, "MISSING_FIELD", "output"},
		{"no thread", func(r *savepointv1.RecordThreadEffectRequest) { r.ThreadId = "" }, "INVALID_GRAPH_KEY", "thread_id"},
	} {
		t.Run("record "+tc.name, func(t *testing.T) {
			r := recordReq("t", "", "c", 1, `"x"`, false)
			tc.edit(r)
			_, err := e.Graph.RecordThreadEffect(ctx, r)
			wantReason(t, err, codes.InvalidArgument, tc.reason, tc.field)
		})
	}
	_, err := e.Graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: "t", PageSize: -1})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_SIZE", "page_size")
	_, err = e.Graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: "t", PageToken: "garbage"})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN", "")
	if got := threadEffects(t, e, "t", 0); len(got) != 1 || got[0].GetState() != savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN {
		t.Fatalf("after refused calls the ledger holds %v", effectKeys(got))
	}
}
