package storetest

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// seedBranch makes session "s" of five revisions:
//
//  1. message a
//  2. message b, pending w1 (side effect, begin-tracked), r1 (read-only)
//     and x1 (side effect, begin-tracked); then w1 is begun and recorded,
//     r1 recorded, x1 begun and never recorded
//  3. message c (the results), nothing pending
//  4. message d, pending y1 (idempotent), then recorded
func seedBranch(t *testing.T, s core.Store) (keys map[string]string) {
	t.Helper()
	create(t, s, "s", msg("user", "a"))
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Task: "task", Turn: 1, StateJSON: `{"at":2}`,
		Labels: map[string]string{"team": "a"}, AppendMessages: []core.Message{msg("assistant", "b")},
		PendingToolUses: []core.ToolUse{
			{ID: "w1", Name: "write", BeginTracked: true}, {ID: "r1", Name: "read", Class: core.ReadOnly}, {ID: "x1", Name: "send", BeginTracked: true},
		}})
	keys = map[string]string{}
	for _, id := range []string{"w1", "x1"} {
		b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: id, Epoch: 0})
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = b.IdempotencyKey
	}
	for _, e := range []core.Effect{{ToolUseID: "w1", Output: "written"}, {ToolUseID: "r1", Output: "notes"}} {
		if _, _, err := s.RecordEffect(ctx, "s", e); err != nil {
			t.Fatal(err)
		}
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Task: "task", Turn: 1, AppendMessages: []core.Message{msg("user", "c")}})
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3, Task: "task", Turn: 2, AppendMessages: []core.Message{msg("assistant", "d")},
		PendingToolUses: []core.ToolUse{{ID: "y1", Name: "pay", Class: core.Idempotent}}})
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "y1", Output: "paid"}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func ids(es []core.LedgerEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.ToolUseID)
	}
	return strings.Join(out, ",")
}

func testRewind(t *testing.T, s core.Store) {
	keys := seedBranch(t, s)
	_, err := s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Epoch: 7, Revision: 2})
	wantState(t, err, core.ErrSessionFenced, 4, 1)
	_, err = s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Revision: 9})
	wantState(t, err, core.ErrRevisionNotFound, 4, 1)
	_, err = s.RewindSession(ctx, &core.RewindRequest{SessionID: "none", Revision: 1})
	wantErr(t, err, core.ErrSessionNotFound)

	req := &core.RewindRequest{SessionID: "s", Revision: 2, RequestID: reqA}
	res, err := s.RewindSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 5 || res.Epoch != 1 || res.MessageCount != 2 {
		t.Fatalf("rewind: %+v", res)
	}
	// After revision 2: w1 and y1 were recorded (r1 is read-only), x1 was
	// begun and never recorded.
	if ids(res.PerformedAfter) != "w1,y1" || ids(res.InDoubtAfter) != "x1" {
		t.Fatalf("after revision 2: performed %s, in doubt %s", ids(res.PerformedAfter), ids(res.InDoubtAfter))
	}
	if res.PerformedAfter[0].Effect.Output != "written" || res.InDoubtAfter[0].IdempotencyKey != keys["x1"] {
		t.Errorf("entries: %+v %+v", res.PerformedAfter[0], res.InDoubtAfter[0])
	}
	cp, err := s.Checkpoint(ctx, "s", 0)
	if err != nil || cp.Revision != 5 || cp.StateJSON != `{"at":2}` || cp.Turn != 1 || len(cp.PendingToolUses) != 3 || cp.Labels["team"] != "a" {
		t.Fatalf("rewound checkpoint: %+v %v", cp, err)
	}
	if got := texts(allMessages(t, s, "s", 5)); got != `"a""b"` {
		t.Fatalf("rewound history %s", got)
	}
	if got := texts(allMessages(t, s, "s", 4)); got != `"a""b""c""d"` {
		t.Fatalf("revision 4 changed: %s", got)
	}
	// The calls recorded since stay recorded: Reconcile reuses w1, x1 is in
	// doubt with its key, and BeginEffect keeps its key.
	rev, calls, err := s.PendingToolUses(ctx, "s")
	if err != nil || rev != 5 {
		t.Fatalf("pending calls: %d %v", rev, err)
	}
	decisions := map[string]core.Decision{}
	for _, r := range core.Reconcile(calls) {
		decisions[r.ToolUse.ID] = r.Decision
	}
	if decisions["w1"] != core.DecisionReuse || decisions["r1"] != core.DecisionReuse || decisions["x1"] != core.DecisionInDoubt {
		t.Errorf("decisions after rewind: %v", decisions)
	}
	if b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "x1", Epoch: 1}); err != nil || !b.AlreadyBegun || b.IdempotencyKey != keys["x1"] {
		t.Errorf("begin x1 again: %+v %v", b, err)
	}
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w1", Epoch: 1})
	wantErr(t, err, core.ErrCallAlreadyRecorded)
	// A retry answers again; the id with another revision is refused.
	if again, err := s.RewindSession(ctx, req); err != nil || again.Revision != 5 || ids(again.PerformedAfter) != "w1,y1" {
		t.Errorf("retry: %+v %v", again, err)
	}
	_, err = s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Revision: 1, RequestID: reqA})
	wantErr(t, err, core.ErrRequestIDReused)
	// A Point B answering the pending calls saves normally.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 5, AppendMessages: []core.Message{msg("user", "results")}})
	// A completed session is not rewound.
	complete(t, s, &core.CompleteRequest{SessionID: "s", Status: core.StatusCompleted})
	_, err = s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Revision: 1})
	wantState(t, err, core.ErrSessionCompleted, 6, 1)
}

func testFork(t *testing.T, s core.Store) {
	keys := seedBranch(t, s)
	_, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "none", NewID: "f"})
	wantErr(t, err, core.ErrSessionNotFound)
	_, err = s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", Revision: 9, NewID: "f"})
	wantErr(t, err, core.ErrRevisionNotFound)

	req := &core.ForkRequest{SourceID: "s", Revision: 2, NewID: "f", RequestID: reqA}
	res, err := s.ForkSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || res.Epoch != 1 || res.MessageCount != 2 || ids(res.PerformedAfter) != "w1,y1" || ids(res.InDoubtAfter) != "x1" {
		t.Fatalf("fork: %+v", res)
	}
	cp, err := s.Checkpoint(ctx, "f", 0)
	if err != nil || cp.Revision != 1 || cp.Task != "task" || cp.StateJSON != `{"at":2}` || len(cp.PendingToolUses) != 3 || cp.Status != core.StatusActive {
		t.Fatalf("fork's checkpoint: %+v %v", cp, err)
	}
	if got := texts(allMessages(t, s, "f", 1)); got != `"a""b"` {
		t.Fatalf("fork's history %s", got)
	}
	// The ledger of the calls in the fork's history, with their keys; y1
	// was named after the fork point and is not in it.
	ledger, err := s.Effects(ctx, "f", "", 10)
	if err != nil || ids(ledger) != "r1,w1,x1" {
		t.Fatalf("fork's ledger %s, %v", ids(ledger), err)
	}
	for _, e := range ledger {
		if e.LastPendingRevision != 1 || (keys[e.ToolUseID] != "" && e.IdempotencyKey != keys[e.ToolUseID]) {
			t.Errorf("fork's entry %+v", e)
		}
	}
	rev, calls, err := s.PendingToolUses(ctx, "f")
	if err != nil || rev != 1 || len(calls) != 3 {
		t.Fatalf("fork's pending calls: %d %+v %v", rev, calls, err)
	}
	for _, r := range core.Reconcile(calls) {
		if want := map[string]core.Decision{"w1": core.DecisionReuse, "r1": core.DecisionReuse, "x1": core.DecisionInDoubt}[r.ToolUse.ID]; r.Decision != want {
			t.Errorf("fork's %s: %v, want %v", r.ToolUse.ID, r.Decision, want)
		}
	}
	// The fork is a session of its own: it saves, and the source is as it was.
	save(t, s, &core.SaveRequest{SessionID: "f", ExpectedRevision: 1, Epoch: 1, AppendMessages: []core.Message{msg("user", "fork")}})
	if got := texts(allMessages(t, s, "s", 0)); got != `"a""b""c""d"` {
		t.Fatalf("source history %s", got)
	}
	// A retry answers again; a fork into an existing session is refused.
	if again, err := s.ForkSession(ctx, req); err != nil || again.Revision != 1 || again.Epoch != 1 {
		t.Errorf("retry: %+v %v", again, err)
	}
	_, err = s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", Revision: 3, NewID: "f", RequestID: reqA})
	wantErr(t, err, core.ErrRequestIDReused)
	_, err = s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"})
	wantState(t, err, core.ErrSessionExists, 2, 1)
	// Revision 0 forks the latest; over a tombstone the epoch goes above it.
	// y1, pending in revision 4, was recorded after it was saved.
	if _, err := s.DeleteSession(ctx, "f", 1); err != nil {
		t.Fatal(err)
	}
	res, err = s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"})
	if err != nil || res.Epoch != 2 || res.MessageCount != 4 || ids(res.PerformedAfter) != "y1" || ids(res.InDoubtAfter) != "" {
		t.Fatalf("fork of the latest over a tombstone: %+v %v", res, err)
	}
	if ledger, err := s.Effects(ctx, "f", "", 10); err != nil || ids(ledger) != "r1,w1,x1,y1" {
		t.Fatalf("fork of the latest: ledger %s, %v", ids(ledger), err)
	}
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "f", ExpectedRevision: 1, Epoch: 1})
	wantErr(t, err, core.ErrSessionFenced)
}

// testForkLongHistory forks a history longer than one copy batch.
func testForkLongHistory(t *testing.T, s core.Store) {
	create(t, s, "long")
	rev := uint64(1)
	for i := range 3 {
		var ms []core.Message
		for j := range 400 {
			ms = append(ms, msg("user", strings.Repeat("x", j%7)+string(rune('a'+i))))
		}
		rev = save(t, s, &core.SaveRequest{SessionID: "long", ExpectedRevision: rev, AppendMessages: ms}).Revision
	}
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "long", NewID: "long-fork"}); err != nil {
		t.Fatal(err)
	}
	src, fork := allMessages(t, s, "long", 0), allMessages(t, s, "long-fork", 0)
	if len(fork) != 1200 || texts(src) != texts(fork) {
		t.Fatalf("fork's history of %d messages differs from the source's %d", len(fork), len(src))
	}
}
