package storetest

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// inDoubtSession creates session id with four pending calls: "w" begun
// (in doubt), "u" never begun and not begin-tracked (in doubt), "t"
// begin-tracked and never begun (run), "r" read-only (run). It returns the
// idempotency key "w" was begun with.
func inDoubtSession(t *testing.T, s core.Store, id string) string {
	t.Helper()
	create(t, s, id)
	save(t, s, &core.SaveRequest{SessionID: id, ExpectedRevision: 1, PendingToolUses: []core.ToolUse{
		{ID: "w", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
		{ID: "u", Name: "send_email"},
		{ID: "t", Name: "write_report", BeginTracked: true},
		{ID: "r", Name: "read_notes", Class: core.ReadOnly},
	}})
	b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: id, ToolUseID: "w", Epoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	return b.IdempotencyKey
}

func epochOf(e uint64) *uint64 { return &e }

func decisions(t *testing.T, s core.Store, id string) map[string]core.Resolution {
	t.Helper()
	rec, err := core.ReconcileSession(ctx, s, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]core.Resolution{}
	for _, r := range rec.Resolutions {
		out[r.ToolUse.ID] = r
	}
	return out
}

func testResolveDone(t *testing.T, s core.Store) {
	inDoubtSession(t, s, "s")
	person := &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedDone, Output: "paid: 5",
		ResolverKind: core.ResolverPerson, ResolvedBy: "alice", Note: "seen in the bank's log"}
	res, err := s.ResolveEffect(ctx, person)
	if err != nil || res.AlreadyResolved {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	e := res.Entry
	if e.Effect == nil || e.Effect.Output != "paid: 5" || e.Effect.IsError || e.Effect.Name != "send_payment" || e.Effect.RecordTime.IsZero() ||
		e.Resolution == nil || e.Resolution.ResolvedBy != "alice" || e.Resolution.Note != "seen in the bank's log" ||
		e.Resolution.ResolverKind != core.ResolverPerson || e.Resolution.Outcome != core.ResolvedDone || e.Resolution.ResolveTime.IsZero() {
		t.Fatalf("entry after DONE: %+v effect %+v resolution %+v", e, e.Effect, e.Resolution)
	}
	// Reconcile reuses the output found, marked with who found it.
	d := decisions(t, s, "s")["w"]
	if d.Decision != core.DecisionReuse || d.ToolUse.Effect == nil || d.ToolUse.Effect.Output != "paid: 5" ||
		d.ToolUse.Effect.Resolution == nil || d.ToolUse.Effect.Resolution.ResolvedBy != "alice" {
		t.Fatalf("reconcile after DONE: %+v effect %+v", d, d.ToolUse.Effect)
	}
	// The same finding again, by anyone, answers with the first record.
	again := *person
	again.ResolverKind, again.ResolvedBy, again.Note = core.ResolverVerify, "verify", ""
	res, err = s.ResolveEffect(ctx, &again)
	if err != nil || !res.AlreadyResolved || res.Entry.Resolution.ResolvedBy != "alice" {
		t.Fatalf("same finding again: %+v %v", res, err)
	}
	// Another finding is a conflict, and changes nothing.
	other := *person
	other.Output = "paid: 6"
	_, err = s.ResolveEffect(ctx, &other)
	wantState(t, err, core.ErrResolutionConflict, 2, 1)
	other = core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedNotDone, ResolverKind: core.ResolverPerson}
	_, err = s.ResolveEffect(ctx, &other)
	wantState(t, err, core.ErrResolutionConflict, 2, 1)
	// The found output is the call's effect: RecordEffect of another
	// outcome conflicts, of the same one is accepted.
	_, _, err = s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "paid: 7"})
	wantState(t, err, core.ErrEffectConflict, 2, 1)
	stored, already, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "paid: 5"})
	if err != nil || !already || stored.Resolution == nil {
		t.Fatalf("record of the found output: %+v %v %v", stored, already, err)
	}
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	wantState(t, err, core.ErrCallAlreadyRecorded, 2, 1)
	// The ledger lists the resolution with its effect.
	entries, err := s.Effects(ctx, "s", "", 10)
	if err != nil || len(entries) != 1 || entries[0].Resolution == nil || entries[0].Effect.Resolution == nil {
		t.Fatalf("effects: %+v %v", entries, err)
	}
	// A call that was never begun nor begin-tracked may be resolved too.
	res, err = s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "u", Outcome: core.ResolvedDone, Output: "bounced",
		IsError: true, ResolverKind: core.ResolverVerify})
	if err != nil || res.Entry.Effect == nil || !res.Entry.Effect.IsError || res.Entry.Begun {
		t.Fatalf("resolve a never-begun call: %+v %v", res, err)
	}
	sum, err := s.Summary(ctx, "s")
	if err != nil || sum.InDoubtToolUseCount != 0 || sum.ResolvedByPerson != 1 || sum.ResolvedByVerify != 1 {
		t.Fatalf("summary: %+v %v", sum, err)
	}
}

func testResolveNotDone(t *testing.T, s core.Store) {
	key := inDoubtSession(t, s, "s")
	cp, err := s.Resume(ctx, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	req := &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedNotDone, ResolverKind: core.ResolverVerify,
		ResolvedBy: "verify", Epoch: epochOf(cp.Epoch - 1)}
	// The owner's resolution is fenced: an older epoch is refused.
	_, err = s.ResolveEffect(ctx, req)
	wantState(t, err, core.ErrSessionFenced, 2, cp.Epoch)
	req.Epoch = epochOf(cp.Epoch)
	res, err := s.ResolveEffect(ctx, req)
	if err != nil || res.Entry.Effect != nil || res.Entry.Resolution == nil || res.Entry.Resolution.Outcome != core.ResolvedNotDone {
		t.Fatalf("resolve NOT_DONE: %+v %v", res, err)
	}
	// Reconcile runs it again, with the same idempotency key.
	d := decisions(t, s, "s")["w"]
	if d.Decision != core.DecisionRun || d.ToolUse.IdempotencyKey != key || d.ToolUse.Resolution == nil {
		t.Fatalf("reconcile after NOT_DONE: %+v", d)
	}
	sum, _ := s.Summary(ctx, "s")
	if sum.InDoubtToolUseCount != 1 || sum.ResolvedByVerify != 1 || sum.ResolvedByPerson != 0 {
		t.Fatalf("summary: %+v", sum)
	}
	// A DONE finding now conflicts; the same NOT_DONE again is accepted.
	_, err = s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedDone, Output: "x", ResolverKind: core.ResolverPerson})
	wantState(t, err, core.ErrResolutionConflict, 2, cp.Epoch)
	res, err = s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedNotDone, ResolverKind: core.ResolverPerson})
	if err != nil || !res.AlreadyResolved {
		t.Fatalf("same NOT_DONE again: %+v %v", res, err)
	}
	// The new attempt is begun under the same key; from then on, until its
	// outcome is recorded, the call is in doubt again.
	b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: cp.Epoch})
	if err != nil || b.IdempotencyKey != key || !b.AlreadyBegun {
		t.Fatalf("begin after NOT_DONE: %+v %v", b, err)
	}
	if d := decisions(t, s, "s")["w"]; d.Decision != core.DecisionInDoubt || d.ToolUse.Resolution == nil || !d.ToolUse.Resolution.RetryBegun {
		t.Fatalf("reconcile after the new attempt began: %+v", d)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: cp.Epoch}); err != nil || b.IdempotencyKey != key || !b.AlreadyBegun {
		t.Fatalf("begin again: %+v %v", b, err)
	}
	// Its record is reused from then on.
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "paid: 5"}); err != nil {
		t.Fatal(err)
	}
	if d := decisions(t, s, "s")["w"]; d.Decision != core.DecisionReuse || d.ToolUse.Effect.Resolution != nil || d.ToolUse.Resolution == nil {
		t.Fatalf("reconcile after the new attempt: %+v", d)
	}
	// The call never begun (not begin-tracked) resolved NOT_DONE: RUN, then
	// in doubt again once begun, and resolvable again, replacing the first
	// resolution.
	if _, err := s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "u", Outcome: core.ResolvedNotDone, ResolverKind: core.ResolverPerson, ResolvedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if d := decisions(t, s, "s")["u"]; d.Decision != core.DecisionRun {
		t.Fatalf("reconcile of u after NOT_DONE: %+v", d)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "u", Epoch: cp.Epoch}); err != nil || b.AlreadyBegun || b.IdempotencyKey == "" {
		t.Fatalf("begin of u: %+v %v", b, err)
	}
	if d := decisions(t, s, "s")["u"]; d.Decision != core.DecisionInDoubt {
		t.Fatalf("reconcile of u after its new attempt began: %+v", d)
	}
	res, err = s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "u", Outcome: core.ResolvedDone, Output: "sent", ResolverKind: core.ResolverPerson, ResolvedBy: "bob"})
	if err != nil || res.AlreadyResolved || res.Entry.Resolution.ResolvedBy != "bob" || res.Entry.Effect == nil {
		t.Fatalf("second resolution of u: %+v %v", res, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.ResolvedByPerson != 2 || sum.ResolvedByVerify != 1 {
		t.Fatalf("summary: %+v", sum)
	}
}

func testResolveRefused(t *testing.T, s core.Store) {
	inDoubtSession(t, s, "s")
	r := func(id string) *core.ResolveRequest {
		return &core.ResolveRequest{SessionID: "s", ToolUseID: id, Outcome: core.ResolvedDone, Output: "x", ResolverKind: core.ResolverPerson}
	}
	_, err := s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "nope", ToolUseID: "w", Outcome: core.ResolvedDone, ResolverKind: core.ResolverPerson})
	wantErr(t, err, core.ErrSessionNotFound)
	_, err = s.ResolveEffect(ctx, r("never"))
	wantErr(t, err, core.ErrCallUnknown)
	for _, id := range []string{"t", "r"} { // Reconcile runs these
		_, err = s.ResolveEffect(ctx, r(id))
		wantState(t, err, core.ErrCallNotInDoubt, 2, 1)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "u", Output: "sent"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.ResolveEffect(ctx, r("u"))
	wantState(t, err, core.ErrCallNotInDoubt, 2, 1)
	// After Point B the call is no longer pending, so no longer in doubt.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2})
	_, err = s.ResolveEffect(ctx, r("w"))
	wantState(t, err, core.ErrCallNotInDoubt, 3, 1)
	entries, _ := s.Effects(ctx, "s", "", 10)
	for _, e := range entries {
		if e.Resolution != nil {
			t.Fatalf("a refused resolution was stored: %+v", e)
		}
	}
	if sum, _ := s.Summary(ctx, "s"); sum.ResolvedByPerson != 0 || sum.ResolvedByVerify != 0 {
		t.Fatalf("a refused resolution was counted: %+v", sum)
	}
}

func testResolveRequestID(t *testing.T, s core.Store) {
	inDoubtSession(t, s, "s")
	const rid = "3f1c2a9e-8d4b-4c1a-9e2f-7a6b5c4d3e2f"
	req := &core.ResolveRequest{SessionID: "s", ToolUseID: "w", Outcome: core.ResolvedDone, Output: "paid",
		ResolverKind: core.ResolverVerify, Epoch: epochOf(0), RequestID: rid}
	first, err := s.ResolveEffect(ctx, req)
	if err != nil || first.AlreadyResolved {
		t.Fatalf("resolve: %+v %v", first, err)
	}
	// A takeover since does not refuse the retry: it answers as the
	// original did, and counts nothing twice.
	if _, err := s.Resume(ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	again, err := s.ResolveEffect(ctx, req)
	if err != nil || again.AlreadyResolved || again.Entry.Effect == nil || again.Entry.Effect.Output != "paid" ||
		!again.Entry.Resolution.ResolveTime.Equal(first.Entry.Resolution.ResolveTime) {
		t.Fatalf("retry: %+v %v", again, err)
	}
	if sum, _ := s.Summary(ctx, "s"); sum.ResolvedByVerify != 1 {
		t.Fatalf("retry counted again: %+v", sum)
	}
	other := *req
	other.ToolUseID = "u"
	_, err = s.ResolveEffect(ctx, &other)
	wantErr(t, err, core.ErrRequestIDReused)
	// Without a request id, the old epoch is fenced.
	other.RequestID = ""
	_, err = s.ResolveEffect(ctx, &other)
	wantState(t, err, core.ErrSessionFenced, 2, 2)
}
