package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

const (
	reqA = "00000000-0000-4000-8000-00000000000a"
	reqB = "00000000-0000-4000-8000-00000000000b"
)

func complete(t *testing.T, s core.Store, req *core.CompleteRequest) core.CompleteResult {
	t.Helper()
	res, err := s.CompleteSession(ctx, req)
	if err != nil {
		t.Fatalf("complete %+v: %v", req, err)
	}
	return res
}

func testComplete(t *testing.T, s core.Store) {
	create(t, s, "s", msg("user", "a"))
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "x"}}})
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Status != core.StatusActive || !cp.CompleteTime.IsZero() {
		t.Fatalf("new session: %+v %v", cp, err)
	}
	_, err := s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "none", Status: core.StatusCompleted})
	wantErr(t, err, core.ErrSessionNotFound)

	req := &core.CompleteRequest{SessionID: "s", Status: core.StatusCompleted, FinalOutput: "42", RequestID: reqA}
	res := complete(t, s, req)
	if res != (core.CompleteResult{Revision: 2, Epoch: 1, Status: core.StatusCompleted}) {
		t.Fatalf("complete: %+v", res)
	}
	cp, err := s.Checkpoint(ctx, "s", 0)
	if err != nil || cp.Status != core.StatusCompleted || cp.FinalOutput != "42" || cp.CompleteTime.IsZero() || cp.Revision != 2 {
		t.Fatalf("completed: %+v %v", cp, err)
	}
	// An older revision reads with the session's status, like its epoch.
	if cp, err := s.Checkpoint(ctx, "s", 1); err != nil || cp.Status != core.StatusCompleted {
		t.Fatalf("revision 1: %+v %v", cp, err)
	}
	// A retry answers again; the same outcome without an id is accepted;
	// another is refused, and so is a request id reused for another payload.
	if got := complete(t, s, req); got != res {
		t.Fatalf("retry: %+v, want %+v", got, res)
	}
	if got := complete(t, s, &core.CompleteRequest{SessionID: "s", Status: core.StatusCompleted, FinalOutput: "42"}); !got.Already {
		t.Fatalf("same outcome again: %+v", got)
	}
	_, err = s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Status: core.StatusFailed, FinalOutput: "42"})
	wantState(t, err, core.ErrSessionCompleted, 2, 1)
	_, err = s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Status: core.StatusCompleted, FinalOutput: "43", RequestID: reqA})
	wantErr(t, err, core.ErrRequestIDReused)
	// A request id of a save cannot be replayed as a completion.
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, RequestID: reqA})
	wantErr(t, err, core.ErrRequestIDReused)

	// A completed session refuses saves and BeginEffect; a record is a fact
	// and is kept.
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2})
	wantState(t, err, core.ErrSessionCompleted, 2, 1)
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 0})
	wantState(t, err, core.ErrSessionCompleted, 2, 1)
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "late"}); err != nil {
		t.Fatalf("record on a completed session: %v", err)
	}

	// Resume returns it as it is, not taking it over.
	cp, err = s.Resume(ctx, "s", false)
	if err != nil || cp.Status != core.StatusCompleted || cp.Epoch != 1 || cp.FinalOutput != "42" {
		t.Fatalf("resume of a completed session: %+v %v", cp, err)
	}
	if cp, _ := s.Checkpoint(ctx, "s", 0); cp.Epoch != 1 || cp.Status != core.StatusCompleted {
		t.Fatalf("resume without reopen changed the session: %+v", cp)
	}
	// Reopening takes it over as an active session.
	cp, err = s.Resume(ctx, "s", true)
	if err != nil || cp.Status != core.StatusActive || cp.Epoch != 2 || cp.FinalOutput != "" || !cp.CompleteTime.IsZero() {
		t.Fatalf("reopen: %+v %v", cp, err)
	}
	if cp, _ := s.Checkpoint(ctx, "s", 0); cp.Status != core.StatusActive || cp.Epoch != 2 {
		t.Fatalf("after reopen: %+v", cp)
	}
	// Fenced like a save: the old owner's epoch is refused.
	_, err = s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Epoch: 1, Status: core.StatusFailed})
	wantState(t, err, core.ErrSessionFenced, 2, 2)
	_, err = s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Epoch: 0, Status: core.StatusFailed})
	wantState(t, err, core.ErrSessionFenced, 2, 2)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 2})
	res = complete(t, s, &core.CompleteRequest{SessionID: "s", Epoch: 2, Status: core.StatusFailed, FinalOutput: "gave up", RequestID: reqB})
	if res != (core.CompleteResult{Revision: 3, Epoch: 2, Status: core.StatusFailed}) {
		t.Fatalf("fail: %+v", res)
	}
	// Resume with reopen of an active session is a plain Resume.
	create(t, s, "other")
	if cp, err := s.Resume(ctx, "other", true); err != nil || cp.Epoch != 2 || cp.Status != core.StatusActive {
		t.Fatalf("reopen of an active session: %+v %v", cp, err)
	}
	// A deleted session's status is gone with it.
	if _, err := s.DeleteSession(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	if res := save(t, s, &core.SaveRequest{SessionID: "s"}); res.Revision != 1 {
		t.Fatalf("re-created: %+v", res)
	}
	if cp, _ := s.Checkpoint(ctx, "s", 0); cp.Status != core.StatusActive || cp.FinalOutput != "" {
		t.Fatalf("re-created session: %+v", cp)
	}
}

func testListFilters(t *testing.T, s core.Store) {
	for _, id := range []string{"done", "failed", "idle", "pending"} {
		create(t, s, id)
	}
	cut := time.Now()
	time.Sleep(5 * time.Millisecond) // past the clock's resolution
	save(t, s, &core.SaveRequest{SessionID: "pending", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "t", Name: "x"}}})
	complete(t, s, &core.CompleteRequest{SessionID: "done", Status: core.StatusCompleted})
	complete(t, s, &core.CompleteRequest{SessionID: "failed", Status: core.StatusFailed})

	list := func(f core.SessionFilter) string {
		t.Helper()
		sums, err := s.ListSessions(ctx, "", 10, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range sums {
			out = append(out, x.SessionID+"="+x.Status.String())
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		f    core.SessionFilter
		want string
	}{
		{core.SessionFilter{}, "done=COMPLETED,failed=FAILED,idle=ACTIVE,pending=ACTIVE"},
		{core.SessionFilter{Status: core.StatusActive}, "idle=ACTIVE,pending=ACTIVE"},
		{core.SessionFilter{Status: core.StatusCompleted}, "done=COMPLETED"},
		{core.SessionFilter{Status: core.StatusFailed}, "failed=FAILED"},
		{core.SessionFilter{HasPendingToolUses: true}, "pending=ACTIVE"},
		{core.SessionFilter{UpdatedBefore: cut}, "idle=ACTIVE"},
		{core.SessionFilter{UpdatedBefore: time.Now().Add(time.Hour), Status: core.StatusActive}, "idle=ACTIVE,pending=ACTIVE"},
		{core.SessionFilter{HasPendingToolUses: true, UpdatedBefore: cut}, ""},
		{core.SessionFilter{Labels: map[string]string{"x": "y"}}, ""},
	} {
		if got := list(tc.f); got != tc.want {
			t.Errorf("filter %+v: %s, want %s", tc.f, got, tc.want)
		}
	}
}

func testEffects(t *testing.T, s core.Store) {
	_, err := s.Effects(ctx, "none", "", 10)
	wantErr(t, err, core.ErrSessionNotFound)
	create(t, s, "s")
	tools := []core.ToolUse{
		{ID: "a-recorded", Name: "x"}, {ID: "b-begun", Name: "y", Class: core.Idempotent, BeginTracked: true},
		{ID: "c-untouched", Name: "z"}, {ID: "d-late", Name: "w", Class: core.ReadOnly},
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: tools})
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "a-recorded", Output: "A"}); err != nil {
		t.Fatal(err)
	}
	begun, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "b-begun", Epoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, PendingToolUses: tools[1:3]})
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "d-late", Output: "D", IsError: true}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Effects(ctx, "s", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("ledger: %+v, want a-recorded, b-begun, d-late", all)
	}
	a, b, d := all[0], all[1], all[2]
	if a.ToolUseID != "a-recorded" || a.Effect == nil || a.Effect.Output != "A" || a.Effect.Late || a.Begun || a.LastPendingRevision != 2 {
		t.Errorf("recorded entry: %+v", a)
	}
	if b.ToolUseID != "b-begun" || !b.Begun || b.IdempotencyKey != begun.IdempotencyKey || b.BeginTime.IsZero() || b.Effect != nil ||
		b.Class != core.Idempotent || !b.BeginTracked || b.LastPendingRevision != 3 || b.Name != "y" {
		t.Errorf("begun entry: %+v", b)
	}
	if d.ToolUseID != "d-late" || d.Effect == nil || !d.Effect.Late || !d.Effect.IsError || d.Class != core.ReadOnly || d.LastPendingRevision != 2 {
		t.Errorf("late entry: %+v", d)
	}
	page, err := s.Effects(ctx, "s", "a-recorded", 1)
	if err != nil || len(page) != 1 || page[0].ToolUseID != "b-begun" {
		t.Errorf("page after a-recorded: %+v %v", page, err)
	}
	if page, err := s.Effects(ctx, "s", "d-late", 10); err != nil || len(page) != 0 {
		t.Errorf("page after the last: %+v %v", page, err)
	}
	// Another session's ledger is apart, even with a prefix of the id.
	create(t, s, "s2")
	if page, err := s.Effects(ctx, "s2", "", 10); err != nil || len(page) != 0 {
		t.Errorf("new session's ledger: %+v %v", page, err)
	}
}
