package storetest

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// The duplicate-intent guard (docs/api.md "The same action under a new
// id"): a call begun with the same name and canonical input as a call an
// earlier, interrupted run (older epoch) began or recorded in the same turn
// window is not run.

func resume(t *testing.T, s core.Store, id string) uint64 {
	t.Helper()
	cp, err := s.Resume(ctx, id, false)
	if err != nil {
		t.Fatalf("resume %s: %v", id, err)
	}
	return cp.Epoch
}

func pay(id, input string) core.ToolUse {
	return core.ToolUse{ID: id, Name: "send_payment", InputJSON: input}
}

// testDuplicateRegister covers the guard on calls registered one at a time
// (no Point A save): the crashed run's call is recorded, the new run's
// reissue under a new id is caught, again and again, by request id too;
// opt-outs, other inputs and other classes run; an old epoch is fenced;
// the next turn's save closes the window.
func testDuplicateRegister(t *testing.T, s core.Store) {
	create(t, s, "s") // revision 1, nothing pending: the turn window's start
	reg := func(u core.ToolUse, epoch uint64, rid string) (core.BeginResult, error) {
		return s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: u, Epoch: epoch, RequestID: rid})
	}
	a, err := reg(pay("a", `{"to":"bob","amount":5}`), 0, "")
	if err != nil || a.Duplicate != nil || a.IdempotencyKey == "" {
		t.Fatalf("first run's call: %+v %v", a, err)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "a", Output: "paid 5 to bob"}); err != nil {
		t.Fatal(err)
	}
	// The process dies before the model's message is saved; a new run takes
	// over and the model reissues the call under a new id, its input's keys
	// in another order.
	epoch := resume(t, s, "s")
	b, err := reg(pay("b", `{ "amount": 5, "to": "bob" }`), epoch, "")
	if err != nil || b.Duplicate == nil || b.IdempotencyKey != "" || b.AlreadyBegun {
		t.Fatalf("reissued call: %+v %v", b, err)
	}
	if d := b.Duplicate; d.ToolUseID != "a" || d.Epoch != 1 || d.IdempotencyKey != a.IdempotencyKey || d.Effect == nil || d.Effect.Output != "paid 5 to bob" ||
		d.IsError || !strings.Contains(d.ToolResultText, "tool_use_id a ") || !strings.HasSuffix(d.ToolResultText, "returned: paid 5 to bob") {
		t.Fatalf("duplicate names %+v effect %+v", d, d.Effect)
	}
	// Asked again, the answer is the same: the call is remembered as a's
	// duplicate, never begun.
	if b2, err := reg(pay("b", `{"amount":5,"to":"bob"}`), epoch, ""); err != nil || b2.Duplicate == nil || b2.Duplicate.ToolUseID != "a" || b2.IdempotencyKey != "" {
		t.Fatalf("reissued call again: %+v %v", b2, err)
	}
	// Bad input on a caught call gets its reason and changes nothing.
	_, err = reg(core.ToolUse{ID: "b", Name: "send_email"}, epoch, "")
	wantErr(t, err, core.ErrToolNameMismatch)
	// The old run is fenced, and enters nothing.
	_, err = reg(pay("z", `{"to":"bob","amount":5}`), 1, "")
	wantState(t, err, core.ErrSessionFenced, 1, epoch)

	// A request id's replay answers the same.
	const rid = "018f6b3e-0000-7000-8000-000000000001"
	c1, err := reg(pay("c", `{"to":"bob","amount":5}`), epoch, rid)
	if err != nil || c1.Duplicate == nil || c1.Duplicate.ToolUseID != "a" {
		t.Fatalf("with a request id: %+v %v", c1, err)
	}
	c2, err := reg(pay("c", `{"to":"bob","amount":5}`), epoch, rid)
	if err != nil || c2.Duplicate == nil || c2.Duplicate.ToolUseID != "a" || c2.IdempotencyKey != "" {
		t.Fatalf("replayed: %+v %v", c2, err)
	}
	_, err = reg(pay("c", `{"to":"bob","amount":6}`), epoch, rid)
	wantErr(t, err, core.ErrRequestIDReused)

	// A repeatable call, a read-only one, another input: each runs.
	rep := pay("d", `{"to":"bob","amount":5}`)
	rep.Repeatable = true
	ro := pay("e", `{"to":"bob","amount":5}`)
	ro.Class = core.ReadOnly
	for _, u := range []core.ToolUse{rep, ro, pay("f", `{"to":"bob","amount":6}`)} {
		if r, err := reg(u, epoch, ""); err != nil || r.Duplicate != nil || r.IdempotencyKey == "" {
			t.Fatalf("%s: %+v %v", u.ID, r, err)
		}
	}
	// The ledger lists the caught calls with the call they repeat.
	entries, err := s.Effects(ctx, "s", "", 20)
	if err != nil {
		t.Fatal(err)
	}
	dups := map[string]string{}
	for _, e := range entries {
		if e.DuplicateOf != "" {
			dups[e.ToolUseID] = e.DuplicateOf
			if e.Begun || e.Effect != nil {
				t.Fatalf("caught call %+v was begun or recorded", e)
			}
		}
		if e.ToolUseID == "d" && !e.Repeatable {
			t.Fatalf("repeatable call stored as %+v", e)
		}
		if e.ToolUseID == "z" {
			t.Fatalf("a fenced register entered %+v", e)
		}
	}
	if len(dups) != 2 || dups["b"] != "a" || dups["c"] != "a" {
		t.Fatalf("ledger's duplicates: %v", dups)
	}

	// The new run saves the turn's end (nothing pending): the window closes,
	// and the same call in the next turn runs.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: epoch, AppendMessages: []core.Message{msg("assistant", "done")}})
	if g, err := reg(pay("g", `{"to":"bob","amount":5}`), epoch, ""); err != nil || g.Duplicate != nil || g.IdempotencyKey == "" {
		t.Fatalf("next turn: %+v %v", g, err)
	}
}

// testDuplicatePending covers the guard on calls saved pending at Point A
// and begun by id: the crashed run's call in doubt is named; once resolved
// DONE the answer carries the output found; a call resolved NOT_DONE or
// refused is no earlier action.
func testDuplicatePending(t *testing.T, s core.Store) {
	create(t, s, "s")
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{
		{ID: "a", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
		{ID: "n", Name: "send_email", InputJSON: `{"to":"x"}`, BeginTracked: true},
		{ID: "r", Name: "delete_file", InputJSON: `{"path":"/tmp/f"}`, BeginTracked: true},
	}})
	a, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "a", Epoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n", "r"} {
		if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: id, Epoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "r", Output: "not allowed", Refused: true}); err != nil {
		t.Fatal(err)
	}
	epoch := resume(t, s, "s")
	if _, err := s.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "n", Outcome: core.ResolvedNotDone,
		ResolverKind: core.ResolverPerson, ResolvedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	// The new run drops the reply it cannot answer, asks the model again
	// and saves the new reply at Point A.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: epoch, PendingToolUses: []core.ToolUse{
		{ID: "b", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
		{ID: "m", Name: "send_email", InputJSON: `{"to":"x"}`, BeginTracked: true},
		{ID: "q", Name: "delete_file", InputJSON: `{"path":"/tmp/f"}`, BeginTracked: true},
	}})
	b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "b", Epoch: epoch})
	if err != nil || b.Duplicate == nil || b.IdempotencyKey != "" {
		t.Fatalf("reissued call: %+v %v", b, err)
	}
	if d := b.Duplicate; d.ToolUseID != "a" || d.Effect != nil || d.IdempotencyKey != a.IdempotencyKey || d.Epoch != 1 ||
		!d.IsError || !strings.Contains(d.ToolResultText, "unknown") {
		t.Fatalf("in-doubt duplicate: %+v", d)
	}
	// Not done, refused: no earlier action; those calls run.
	for _, id := range []string{"m", "q"} {
		if r, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: id, Epoch: epoch}); err != nil || r.Duplicate != nil || r.IdempotencyKey == "" {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
	}
	// The old process, still alive, records the earlier payment late (a
	// record is not fenced): the caught call's answer now carries it.
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "a", Output: "paid"}); err != nil {
		t.Fatal(err)
	}
	b, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "b", Epoch: epoch})
	if err != nil || b.Duplicate == nil || b.Duplicate.Effect == nil || b.Duplicate.Effect.Output != "paid" || !b.Duplicate.Effect.Late {
		t.Fatalf("after the earlier call's record: %+v %v", b, err)
	}
	// The old run is fenced.
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "b", Epoch: 1})
	wantState(t, err, core.ErrSessionFenced, 3, epoch)
}

// testDuplicateSameReply covers two identical calls of one saved model
// reply: the crashed run began the first only; the resumed run answers the
// first by its id (in doubt) and runs the second, which the model asked
// for too.
func testDuplicateSameReply(t *testing.T, s core.Store) {
	create(t, s, "s")
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{
		{ID: "a1", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
		{ID: "a2", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
	}})
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "a1", Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	epoch := resume(t, s, "s")
	if r, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "a2", Epoch: epoch}); err != nil || r.Duplicate != nil || r.IdempotencyKey == "" {
		t.Fatalf("second call of the saved reply: %+v %v", r, err)
	}
	// After the turn's end is saved with a1's doubt and a2's result, a call
	// registered by the new run with the same input runs: the window closed.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: epoch, AppendMessages: []core.Message{msg("user", "results")}})
	if r, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: pay("a3", `{"amount":5}`), Epoch: epoch}); err != nil || r.Duplicate != nil {
		t.Fatalf("next turn: %+v %v", r, err)
	}
}

// testDuplicateSameRun covers the rule that an uncrashed run never trips
// the guard: two identical calls in one epoch both run, before and after a
// resume.
func testDuplicateSameRun(t *testing.T, s core.Store) {
	for i, epoch := range []uint64{0, 2} {
		id := []string{"fresh", "resumed"}[i]
		create(t, s, id)
		if epoch != 0 {
			if got := resume(t, s, id); got != epoch {
				t.Fatalf("resumed to epoch %d", got)
			}
		}
		save(t, s, &core.SaveRequest{SessionID: id, ExpectedRevision: 1, Epoch: epoch, PendingToolUses: []core.ToolUse{
			{ID: "a", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
			{ID: "b", Name: "send_payment", InputJSON: `{"amount":5}`, BeginTracked: true},
		}})
		keys := map[string]bool{}
		for _, call := range []string{"a", "b"} {
			r, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: id, ToolUseID: call, Epoch: epoch})
			if err != nil || r.Duplicate != nil || r.IdempotencyKey == "" {
				t.Fatalf("%s/%s: %+v %v", id, call, r, err)
			}
			keys[r.IdempotencyKey] = true
		}
		r, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: id, ToolUse: pay("c", `{"amount":5}`), Epoch: epoch})
		if err != nil || r.Duplicate != nil || r.IdempotencyKey == "" {
			t.Fatalf("%s/c: %+v %v", id, r, err)
		}
		if keys[r.IdempotencyKey] || len(keys) != 2 {
			t.Fatalf("%s: keys not distinct", id)
		}
	}
}
