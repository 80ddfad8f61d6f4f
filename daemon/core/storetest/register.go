package storetest

import (
	"sync"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// testRegister covers BeginEffect with a tool use: a call the ledger does
// not know is entered and begun in one write without a revision, a known
// one is begun as usual, a recorded one is answered with its effect, and
// the request id, epoch and status are checked in that order.
func testRegister(t *testing.T, s core.Store) {
	create(t, s, "s")
	reg := func(id, name, rid string, epoch uint64) (core.BeginResult, error) {
		return s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: core.ToolUse{ID: id, Name: name, InputJSON: `{"a":1}`}, Epoch: epoch, RequestID: rid})
	}
	_, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "nope", ToolUse: core.ToolUse{ID: "w", Name: "write_report"}})
	wantErr(t, err, core.ErrSessionNotFound)

	b1, err := reg("w", "write_report", "", 0)
	if err != nil || b1.AlreadyBegun || b1.IdempotencyKey == "" || b1.Effect != nil {
		t.Fatalf("register: %+v %v", b1, err)
	}
	// No revision was made.
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Revision != 1 || len(cp.PendingToolUses) != 0 {
		t.Fatalf("register made a revision: %+v %v", cp, err)
	}
	b2, err := reg("w", "write_report", "", 0)
	if err != nil || !b2.AlreadyBegun || b2.IdempotencyKey != b1.IdempotencyKey {
		t.Fatalf("register again: %+v %v", b2, err)
	}
	_, err = reg("w", "other", "", 0)
	wantErr(t, err, core.ErrToolNameMismatch)

	// The ledger lists it begun and registered; a save in between does not
	// make its record late.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, AppendMessages: []core.Message{msg("user", "go")}})
	e, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "written"})
	if err != nil || e.Late || e.Name != "write_report" {
		t.Fatalf("record a registered call: %+v %v", e, err)
	}
	entries, err := s.Effects(ctx, "s", "", 10)
	if err != nil || len(entries) != 1 || !entries[0].Registered || !entries[0].Begun || !entries[0].BeginTracked || entries[0].LastPendingRevision != 1 {
		t.Fatalf("ledger: %+v %v", entries, err)
	}
	// A recorded call is answered with its effect, writing nothing.
	b3, err := reg("w", "write_report", "", 0)
	if err != nil || b3.Effect == nil || b3.Effect.Output != "written" || b3.IdempotencyKey != b1.IdempotencyKey {
		t.Fatalf("register a recorded call: %+v %v", b3, err)
	}

	// A call a save made pending is begun by Register, keeping its class.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, PendingToolUses: []core.ToolUse{{ID: "p", Name: "read_notes", Class: core.ReadOnly}}})
	if b, err := reg("p", "read_notes", "", 0); err != nil || b.AlreadyBegun {
		t.Fatalf("register a pending call: %+v %v", b, err)
	}
	_, calls, _ := s.PendingToolUses(ctx, "s")
	if len(calls) != 1 || !calls[0].Begun || calls[0].Class != core.ReadOnly {
		t.Fatalf("pending call after register: %+v", calls)
	}

	// Request ids: a retry answers as the first time, even after the call
	// was begun by it; another request under the same id is refused.
	const rid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	r1, err := reg("x", "write_report", rid, 0)
	if err != nil || r1.AlreadyBegun {
		t.Fatalf("register with a request id: %+v %v", r1, err)
	}
	r2, err := reg("x", "write_report", rid, 0)
	if err != nil || r2.AlreadyBegun || r2.IdempotencyKey != r1.IdempotencyKey {
		t.Fatalf("retry: %+v %v", r2, err)
	}
	_, err = reg("y", "write_report", rid, 0)
	wantErr(t, err, core.ErrRequestIDReused)

	// Fencing: after a Resume the old epoch is refused, and nothing is
	// registered.
	cp, err := s.Resume(ctx, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg("z", "write_report", "", cp.Epoch-1)
	wantErr(t, err, core.ErrSessionFenced)
	_, calls, err = s.LedgerToolUses(ctx, "s", []string{"z"})
	if err != nil || calls[0].Begun || calls[0].Name != "" {
		t.Fatalf("a fenced register wrote: %+v %v", calls, err)
	}
	// A completed session refuses it.
	if _, err := s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Epoch: cp.Epoch, Status: core.StatusCompleted, FinalOutput: "done"}); err != nil {
		t.Fatal(err)
	}
	_, err = reg("z", "write_report", "", cp.Epoch)
	wantErr(t, err, core.ErrSessionCompleted)
}

// testRegisterParallel registers many calls of one session at once: none
// contends on the revision, and each is begun exactly once.
func testRegisterParallel(t *testing.T, s core.Store) {
	create(t, s, "s")
	const n = 16
	keys := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var b core.BeginResult
			b, errs[i] = s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: core.ToolUse{ID: string(rune('a' + i)), Name: "write_report"}})
			keys[i] = b.IdempotencyKey
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || keys[i] == "" || seen[keys[i]] {
			t.Fatalf("call %d: key %q err %v", i, keys[i], errs[i])
		}
		seen[keys[i]] = true
	}
	if entries, err := s.Effects(ctx, "s", "", 100); err != nil || len(entries) != n {
		t.Fatalf("ledger holds %d entries (%v), want %d", len(entries), err, n)
	}
}

// testRefused covers a refusal: recorded as an error that never ran, reused
// by Reconcile, and a conflict with any other outcome.
func testRefused(t *testing.T, s core.Store) {
	create(t, s, "s")
	if _, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: core.ToolUse{ID: "w", Name: "write_report"}}); err != nil {
		t.Fatal(err)
	}
	e, already, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "denied by policy", Refused: true})
	if err != nil || already || !e.Refused || !e.IsError {
		t.Fatalf("refuse: %+v %v %v", e, already, err)
	}
	if _, already, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "denied by policy", Refused: true, IsError: true}); err != nil || !already {
		t.Fatalf("the same refusal again: %v %v", already, err)
	}
	_, _, err = s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "denied by policy", IsError: true})
	wantState(t, err, core.ErrEffectConflict, 1, 1)
	entries, err := s.Effects(ctx, "s", "", 10)
	if err != nil || len(entries) != 1 || entries[0].Effect == nil || !entries[0].Effect.Refused {
		t.Fatalf("ledger: %+v %v", entries, err)
	}
	rec, err := core.ReconcileCalls(ctx, s, "s", []string{"w"})
	if err != nil || len(rec.Resolutions) != 1 || rec.Resolutions[0].Decision != core.DecisionReuse || !rec.Resolutions[0].ToolUse.Effect.Refused {
		t.Fatalf("reconcile a refusal: %+v %v", rec, err)
	}
}

// testReconcileCalls decides calls named by id from the ledger: recorded
// ones are reused, registered side-effecting ones begun but not recorded are
// in doubt, read-only ones run, and unknown ones were never begun.
func testReconcileCalls(t *testing.T, s core.Store) {
	create(t, s, "s")
	for _, u := range []core.ToolUse{{ID: "hit", Name: "write_report"}, {ID: "doubt", Name: "write_report"}, {ID: "ro", Name: "read_notes", Class: core.ReadOnly}} {
		if _, err := s.RegisterEffect(ctx, &core.RegisterRequest{SessionID: "s", ToolUse: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "hit", Output: "done"}); err != nil {
		t.Fatal(err)
	}
	_, err := core.ReconcileCalls(ctx, s, "nope", []string{"hit"})
	wantErr(t, err, core.ErrSessionNotFound)
	rec, err := core.ReconcileCalls(ctx, s, "s", []string{"never", "ro", "doubt", "hit"})
	if err != nil || rec.Revision != 1 || len(rec.Resolutions) != 4 {
		t.Fatalf("reconcile: %+v %v", rec, err)
	}
	want := []core.Decision{core.DecisionRun, core.DecisionRun, core.DecisionInDoubt, core.DecisionReuse}
	for i, r := range rec.Resolutions {
		if r.Decision != want[i] {
			t.Errorf("%s: %v, want %v", r.ToolUse.ID, r.Decision, want[i])
		}
	}
	if r := rec.Resolutions[2]; r.ToolResultText == "" || !r.ToolUse.Begun || r.ToolUse.Name != "write_report" {
		t.Errorf("in doubt: %+v", r)
	}
	if r := rec.Resolutions[3]; r.ToolUse.Effect == nil || r.ToolUse.Effect.Output != "done" {
		t.Errorf("reuse: %+v", r)
	}
}

// testBeginRequestID covers BeginEffect of a pending tool use with a
// request id (BeginRequest.RequestID): its retry with the same id gets
// the first answer, already_begun false, where a retry without one is
// already_begun; the same id on another tool use is REQUEST_ID_REUSED; and
// a refused begin stores nothing, so its retry after the refusal's cause is
// gone is performed.
func testBeginRequestID(t *testing.T, s core.Store) {
	create(t, s, "s")
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1,
		PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}, {ID: "v", Name: "write_report"}}})
	begin := func(id, rid string, epoch uint64) (core.BeginResult, error) {
		return s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: id, Epoch: epoch, RequestID: rid})
	}
	const rid = "00000000-0000-4000-8000-0000000000b1"
	b1, err := begin("w", rid, 0)
	if err != nil || b1.AlreadyBegun || b1.IdempotencyKey == "" {
		t.Fatalf("begin: %+v %v", b1, err)
	}
	b2, err := begin("w", rid, 0)
	if err != nil || b2.AlreadyBegun || b2.IdempotencyKey != b1.IdempotencyKey {
		t.Fatalf("its retry with the request id: %+v %v, want the first answer %+v", b2, err, b1)
	}
	b3, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w"})
	if err != nil || !b3.AlreadyBegun || b3.IdempotencyKey != b1.IdempotencyKey {
		t.Fatalf("a begin without it: %+v %v, want already begun", b3, err)
	}
	_, err = begin("v", rid, 0)
	wantErr(t, err, core.ErrRequestIDReused)
	_, err = begin("u", "00000000-0000-4000-8000-0000000000b2", 0)
	wantErr(t, err, core.ErrCallNotPending)
	_, err = begin("w", "00000000-0000-4000-8000-0000000000b3", 7)
	wantErr(t, err, core.ErrSessionFenced)
}

// testRecordRequestID covers RecordEffect with a request id: its retry
// with the same id gets the first answer, already_recorded false, where a
// repeat without one is already_recorded; the same id with another output
// is REQUEST_ID_REUSED, and the first record stands.
func testRecordRequestID(t *testing.T, s core.Store) {
	create(t, s, "s")
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}}})
	const rid = "00000000-0000-4000-8000-0000000000c1"
	e := core.Effect{ToolUseID: "w", Output: "written", RequestID: rid}
	first, already, err := s.RecordEffect(ctx, "s", e)
	if err != nil || already || first.Output != "written" {
		t.Fatalf("record: %+v already=%v %v", first, already, err)
	}
	again, already, err := s.RecordEffect(ctx, "s", e)
	if err != nil || already || again.Output != "written" || !again.RecordTime.Equal(first.RecordTime) {
		t.Fatalf("its retry with the request id: %+v already=%v %v, want the first answer", again, already, err)
	}
	plain := e
	plain.RequestID = ""
	if _, already, err := s.RecordEffect(ctx, "s", plain); err != nil || !already {
		t.Fatalf("a repeat without it: already=%v %v, want already recorded", already, err)
	}
	other := e
	other.Output = "other"
	_, _, err = s.RecordEffect(ctx, "s", other)
	wantErr(t, err, core.ErrRequestIDReused)
	ledger, err := s.Effects(ctx, "s", "", 10)
	if err != nil || len(ledger) != 1 || ledger[0].Effect == nil || ledger[0].Effect.Output != "written" {
		t.Fatalf("ledger: %+v %v", ledger, err)
	}
}
