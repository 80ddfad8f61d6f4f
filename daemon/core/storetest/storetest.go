// Package storetest is the conformance suite every core.Store must pass:
// each state transition of the checkpoint protocol and each error it returns.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Run runs the suite; newStore returns an empty store that the test owns and
// closes.
func Run(t *testing.T, newStore func(t *testing.T) core.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s core.Store)
	}{
		{"CreateAndRead", testCreateAndRead},
		{"SaveChecks", testSaveChecks},
		{"RequestID", testRequestID},
		{"Fencing", testFencing},
		{"HistoryRewrite", testHistoryRewrite},
		{"PendingAndLedger", testPendingAndLedger},
		{"BeginEffect", testBeginEffect},
		{"RecordEffect", testRecordEffect},
		{"ResolveDone", testResolveDone},
		{"ResolveNotDone", testResolveNotDone},
		{"ResolveRefused", testResolveRefused},
		{"ResolveRequestID", testResolveRequestID},
		{"ApproveOnce", testApproveOnce},
		{"ApproveDeny", testApproveDeny},
		{"ApproveOtherInput", testApproveOtherInput},
		{"ApproveRefused", testApproveRefused},
		{"ApproveFork", testApproveFork},
		{"AwaitingCount", testAwaitingCount},
		{"ResolutionHistory", testResolutionHistory},
		{"ApprovalHistory", testApprovalHistory},
		{"ReconcileInputs", testReconcileInputs},
		{"Register", testRegister},
		{"RegisterParallel", testRegisterParallel},
		{"BeginRequestID", testBeginRequestID},
		{"RecordRequestID", testRecordRequestID},
		{"Refused", testRefused},
		{"ReconcileCalls", testReconcileCalls},
		{"Messages", testMessages},
		{"ListSessions", testListSessions},
		{"CreateTime", testCreateTime},
		{"Summary", testSummary},
		{"ListByUpdate", testListByUpdate},
		{"Watch", testWatch},
		{"WatchIdle", testWatchIdle},
		{"Delete", testDelete},
		{"KeyIsolation", testKeyIsolation},
		{"Complete", testComplete},
		{"ListFilters", testListFilters},
		{"Effects", testEffects},
		{"Rewind", testRewind},
		{"Fork", testFork},
		{"ForkLongHistory", testForkLongHistory},
		{"ThreadEffectOutputBudget", testThreadEffectOutputBudget},
		{"DuplicateRegister", testDuplicateRegister},
		{"DuplicatePending", testDuplicatePending},
		{"DuplicateSameRun", testDuplicateSameRun},
		{"DuplicateSameReply", testDuplicateSameReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

var ctx = context.Background()

func msg(role, text string) core.Message {
	return core.Message{Role: role, ContentJSON: fmt.Sprintf("%q", text)}
}

func create(t *testing.T, s core.Store, id string, msgs ...core.Message) core.SaveResult {
	t.Helper()
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, Task: "task", AppendMessages: msgs})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return res
}

func save(t *testing.T, s core.Store, req *core.SaveRequest) core.SaveResult {
	t.Helper()
	res, err := s.SaveCheckpoint(ctx, req)
	if err != nil {
		t.Fatalf("save %+v: %v", req, err)
	}
	return res
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

func wantState(t *testing.T, err, want error, rev, epoch uint64) {
	t.Helper()
	wantErr(t, err, want)
	var se *core.StateError
	if !errors.As(err, &se) {
		t.Fatalf("%v is not a *StateError", err)
	}
	if se.CurrentRevision != rev || se.CurrentEpoch != epoch {
		t.Fatalf("state error carries revision %d epoch %d, want %d %d", se.CurrentRevision, se.CurrentEpoch, rev, epoch)
	}
}

func allMessages(t *testing.T, s core.Store, id string, rev uint64) []core.Message {
	t.Helper()
	var out []core.Message
	for {
		page, err := s.Messages(ctx, id, rev, uint64(len(out)), 1<<20, 0)
		if err != nil {
			t.Fatalf("messages %s@%d: %v", id, rev, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
	}
}

func texts(ms []core.Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.ContentJSON)
	}
	return b.String()
}

func testCreateAndRead(t *testing.T, s core.Store) {
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{
		SessionID: "s1", Task: "report", Turn: 1, TokensUsed: 42, StateJSON: `{"k":1}`,
		Labels:         map[string]string{"team": "a"},
		AppendMessages: []core.Message{msg("user", "hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res != (core.SaveResult{Revision: 1, MessageCount: 1, Epoch: 1}) {
		t.Fatalf("create returned %+v", res)
	}
	cp, err := s.Checkpoint(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Revision != 1 || cp.Epoch != 1 || cp.Task != "report" || cp.Turn != 1 || cp.TokensUsed != 42 ||
		cp.StateJSON != `{"k":1}` || cp.Labels["team"] != "a" || cp.MessageCount != 1 || cp.SaveTime.IsZero() {
		t.Fatalf("checkpoint %+v", cp)
	}
	if _, err := s.Checkpoint(ctx, "nope", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("missing session: %v", err)
	}
	_, err = s.Checkpoint(ctx, "s1", 2)
	wantState(t, err, core.ErrRevisionNotFound, 1, 1)
}

func testSaveChecks(t *testing.T, s core.Store) {
	create(t, s, "s")
	_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"})
	wantState(t, err, core.ErrSessionExists, 1, 1)
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 5})
	wantState(t, err, core.ErrRevisionMismatch, 1, 1)
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "other", ExpectedRevision: 1})
	wantErr(t, err, core.ErrSessionNotFound)
	keep := uint64(2)
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, KeepMessages: &keep})
	wantState(t, err, core.ErrKeepMessagesOutOfRange, 1, 1)
	// None of the refused saves changed anything.
	cp, err := s.Checkpoint(ctx, "s", 0)
	if err != nil || cp.Revision != 1 {
		t.Fatalf("after refused saves: %+v %v", cp, err)
	}
	res := save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1})
	if res.Revision != 2 {
		t.Fatalf("revision %d, want 2", res.Revision)
	}
}

func testRequestID(t *testing.T, s core.Store) {
	const id = "6f1c1a52-0a4e-4c55-9b1e-3d1a6a7c9e10"
	create(t, s, "s")
	req := &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, RequestID: id, AppendMessages: []core.Message{msg("user", "a")}}
	first := save(t, s, req)
	// A retry returns the original response and writes nothing.
	again := save(t, s, req)
	if again != first {
		t.Fatalf("retry returned %+v, want %+v", again, first)
	}
	if cp, _ := s.Checkpoint(ctx, "s", 0); cp.Revision != 2 || cp.MessageCount != 1 {
		t.Fatalf("retry changed the session: %+v", cp)
	}
	// The same id with another payload is refused.
	other := *req
	other.AppendMessages = []core.Message{msg("user", "b")}
	_, err := s.SaveCheckpoint(ctx, &other)
	wantErr(t, err, core.ErrRequestIDReused)
	// The id stays remembered after many later saves (the API promises 64).
	rev := uint64(2)
	for i := range 63 {
		rev = save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, RequestID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}).Revision
	}
	if got := save(t, s, req); got != first {
		t.Fatalf("retry after 63 saves returned %+v, want %+v", got, first)
	}
	// A retry from before a Resume still gets its answer (the id check comes first).
	if _, err := s.Resume(ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	if got := save(t, s, req); got != first {
		t.Fatalf("retry after resume returned %+v", got)
	}
}

func testFencing(t *testing.T, s core.Store) {
	create(t, s, "s")
	// Epoch 0 works before any Resume.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
	cp, err := s.Resume(ctx, "s", false)
	if err != nil || cp.Epoch != 2 {
		t.Fatalf("resume: %+v %v", cp, err)
	}
	cp2, err := s.Resume(ctx, "s", false)
	if err != nil || cp2.Epoch != 3 {
		t.Fatalf("second resume: %+v %v", cp2, err)
	}
	for _, epoch := range []uint64{0, 1, 2, 4} {
		_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: epoch})
		wantState(t, err, core.ErrSessionFenced, 2, 3)
		// Fencing wins over a revision mismatch.
		_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 9, Epoch: epoch})
		wantState(t, err, core.ErrSessionFenced, 2, 3)
		_, err = s.DeleteSession(ctx, "s", epoch)
		wantState(t, err, core.ErrSessionFenced, 2, 3)
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 3, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "x"}}})
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 2})
	wantState(t, err, core.ErrSessionFenced, 3, 3)
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	// A finished effect is a fact: recording is not fenced.
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "done"}); err != nil {
		t.Fatalf("record from a stale process: %v", err)
	}
}

func testHistoryRewrite(t *testing.T, s core.Store) {
	create(t, s, "s", msg("user", "a"), msg("assistant", "b"))
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, AppendMessages: []core.Message{msg("user", "c")}})
	keep := uint64(1)
	res := save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, KeepMessages: &keep, AppendMessages: []core.Message{msg("user", "X")}})
	if res.MessageCount != 2 {
		t.Fatalf("message count %d, want 2", res.MessageCount)
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3, AppendMessages: []core.Message{msg("user", "Y")}})
	zero := uint64(0)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 4, KeepMessages: &zero})
	for rev, want := range map[uint64]string{1: `"a""b"`, 2: `"a""b""c"`, 3: `"a""X"`, 4: `"a""X""Y"`, 5: ``} {
		if got := texts(allMessages(t, s, "s", rev)); got != want {
			t.Errorf("revision %d holds %s, want %s", rev, got, want)
		}
	}
}

func testPendingAndLedger(t *testing.T, s core.Store) {
	create(t, s, "s")
	calls := []core.ToolUse{
		{ID: "r", Name: "read_notes", InputJSON: `{}`, Class: core.ReadOnly},
		{ID: "w", Name: "write_report", Class: core.SideEffect, BeginTracked: true},
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: calls, AppendMessages: []core.Message{msg("assistant", "tool_use")}})
	cp, _ := s.Checkpoint(ctx, "s", 0)
	if len(cp.PendingToolUses) != 2 || cp.PendingToolUses[1] != calls[1] {
		t.Fatalf("pending %+v", cp.PendingToolUses)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	// Point B clears the set; a recorded call cannot be made pending again.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2})
	_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3, PendingToolUses: calls[1:]})
	wantState(t, err, core.ErrCallAlreadyRecorded, 3, 1)
	if cp, _ := s.Checkpoint(ctx, "s", 2); len(cp.PendingToolUses) != 2 {
		t.Fatalf("revision 2 lost its pending set: %+v", cp.PendingToolUses)
	}
}

func testBeginEffect(t *testing.T, s core.Store) {
	create(t, s, "s")
	_, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	wantState(t, err, core.ErrCallNotPending, 1, 1)
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "nope", ToolUseID: "w", Epoch: 0})
	wantErr(t, err, core.ErrSessionNotFound)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}}})
	b1, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	if err != nil || b1.IdempotencyKey == "" || b1.AlreadyBegun {
		t.Fatalf("begin: %+v %v", b1, err)
	}
	b2, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	if err != nil || b2.IdempotencyKey != b1.IdempotencyKey || !b2.AlreadyBegun {
		t.Fatalf("repeat begin: %+v %v", b2, err)
	}
	if cp, _ := s.Checkpoint(ctx, "s", 0); cp.Revision != 2 {
		t.Fatalf("begin changed the revision to %d", cp.Revision)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	wantState(t, err, core.ErrCallAlreadyRecorded, 2, 1)
	// After Point B the call is no longer pending.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2})
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "w", Epoch: 0})
	wantState(t, err, core.ErrCallNotPending, 3, 1)
	// Another session's key differs.
	create(t, s, "t")
	save(t, s, &core.SaveRequest{SessionID: "t", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}}})
	b3, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "t", ToolUseID: "w", Epoch: 0})
	if err != nil || b3.IdempotencyKey == b1.IdempotencyKey {
		t.Fatalf("other session's begin: %+v %v", b3, err)
	}
}

func testRecordEffect(t *testing.T, s core.Store) {
	create(t, s, "s")
	_, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "x"})
	wantErr(t, err, core.ErrCallUnknown)
	_, _, err = s.RecordEffect(ctx, "nope", core.Effect{ToolUseID: "w", Output: "x"})
	wantErr(t, err, core.ErrSessionNotFound)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}, {ID: "v", Name: "count_words"}}})
	_, _, err = s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Name: "other", Output: "x"})
	wantErr(t, err, core.ErrToolNameMismatch)
	e, already, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "written", IsError: false})
	if err != nil || already || e.Name != "write_report" || e.RecordTime.IsZero() || e.Late {
		t.Fatalf("record: %+v %v %v", e, already, err)
	}
	e2, already, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Name: "write_report", Output: "written"})
	if err != nil || !already || !e2.RecordTime.Equal(e.RecordTime) {
		t.Fatalf("same record again: %+v %v %v", e2, already, err)
	}
	_, _, err = s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "written", IsError: true})
	wantState(t, err, core.ErrEffectConflict, 2, 1)
	_, calls, _ := s.PendingToolUses(ctx, "s")
	if calls[0].Effect == nil || calls[0].Effect.IsError || calls[0].Effect.Output != "written" {
		t.Fatalf("conflict changed the stored effect: %+v", calls[0].Effect)
	}
	// A record after the call stopped being pending is kept and flagged late.
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2})
	late, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "v", Output: "3", IsError: true})
	if err != nil || !late.Late || !late.IsError {
		t.Fatalf("late record: %+v %v", late, err)
	}
}

func testReconcileInputs(t *testing.T, s core.Store) {
	create(t, s, "s")
	calls := []core.ToolUse{
		{ID: "hit", Name: "write_report"},
		{ID: "ro", Name: "read_notes", Class: core.ReadOnly},
		{ID: "idem", Name: "pay", Class: core.Idempotent, BeginTracked: true},
		{ID: "never", Name: "write_report", BeginTracked: true},
		{ID: "begun", Name: "write_report", BeginTracked: true},
		{ID: "untracked", Name: "write_report"},
	}
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: calls})
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "hit", Output: "done"}); err != nil {
		t.Fatal(err)
	}
	idem, _ := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "idem", Epoch: 0})
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "begun", Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	rev, pending, err := s.PendingToolUses(ctx, "s")
	if err != nil || rev != 2 || len(pending) != len(calls) {
		t.Fatalf("pending calls: %d %+v %v", rev, pending, err)
	}
	got := core.Reconcile(pending)
	want := []core.Decision{core.DecisionReuse, core.DecisionRun, core.DecisionRun, core.DecisionRun, core.DecisionInDoubt, core.DecisionInDoubt}
	for i, r := range got {
		if r.ToolUse.ID != calls[i].ID || r.Decision != want[i] {
			t.Errorf("%s: %v, want %v", calls[i].ID, r.Decision, want[i])
		}
	}
	if got[0].ToolUse.Effect.Output != "done" || got[2].ToolUse.IdempotencyKey != idem.IdempotencyKey {
		t.Errorf("reuse output %q, idempotent key %q", got[0].ToolUse.Effect.Output, got[2].ToolUse.IdempotencyKey)
	}
	if !strings.Contains(got[4].ToolResultText, "unknown") || got[5].ToolResultText == "" {
		t.Errorf("in-doubt text %q", got[4].ToolResultText)
	}
	// ListSessions counts what Reconcile decides: begun and untracked are in doubt.
	create(t, s, "t")
	sums, err := s.ListSessions(ctx, "", 10, core.SessionFilter{})
	if err != nil || len(sums) != 2 {
		t.Fatalf("list: %+v %v", sums, err)
	}
	if c := sums[0]; c.PendingToolUseCount != 6 || c.InDoubtToolUseCount != 2 {
		t.Errorf("summary of s: %d pending, %d in doubt; want 6, 2", c.PendingToolUseCount, c.InDoubtToolUseCount)
	}
	if c := sums[1]; c.PendingToolUseCount != 0 || c.InDoubtToolUseCount != 0 {
		t.Errorf("summary of t: %d pending, %d in doubt; want 0, 0", c.PendingToolUseCount, c.InDoubtToolUseCount)
	}
}

func testMessages(t *testing.T, s core.Store) {
	var ms []core.Message
	for i := range 10 {
		ms = append(ms, msg("user", fmt.Sprint(i)))
	}
	create(t, s, "s", ms[:4]...)
	keep := uint64(3)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, KeepMessages: &keep, AppendMessages: ms[3:]})
	// Paging across segments, by count and by bytes.
	for _, tc := range []struct{ start, maxBytes, maxCount, want int }{
		{0, 1 << 20, 0, 10}, {2, 1 << 20, 3, 3}, {9, 1 << 20, 0, 1}, {10, 1 << 20, 0, 0},
		{0, 1, 0, 1}, {0, 2 * core.MessageSize(ms[0]), 0, 2},
	} {
		got, err := s.Messages(ctx, "s", 0, uint64(tc.start), tc.maxBytes, tc.maxCount)
		if err != nil || len(got) != tc.want {
			t.Errorf("%+v: %d messages, %v", tc, len(got), err)
			continue
		}
		for i, m := range got {
			if m != ms[tc.start+i] {
				t.Errorf("%+v: message %d is %+v", tc, i, m)
			}
		}
	}
}

func testListSessions(t *testing.T, s core.Store) {
	for _, id := range []string{"b", "a", "a.1", "c"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, Labels: map[string]string{"team": id[:1]}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteSession(ctx, "c", 0); err != nil {
		t.Fatal(err)
	}
	ids := func(ss []core.SessionSummary) string {
		var out []string
		for _, x := range ss {
			out = append(out, x.SessionID)
		}
		return strings.Join(out, ",")
	}
	page, _ := s.ListSessions(ctx, "", 2, core.SessionFilter{})
	if ids(page) != "a,a.1" {
		t.Fatalf("first page %s", ids(page))
	}
	page, _ = s.ListSessions(ctx, "a.1", 2, core.SessionFilter{})
	if ids(page) != "b" {
		t.Fatalf("second page %s", ids(page))
	}
	page, _ = s.ListSessions(ctx, "", 10, core.SessionFilter{Labels: map[string]string{"team": "a"}})
	if ids(page) != "a,a.1" {
		t.Fatalf("filtered %s", ids(page))
	}
}

func testDelete(t *testing.T, s core.Store) {
	create(t, s, "s", msg("user", "old"))
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "w", Name: "write_report"}}})
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "x"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Resume(ctx, "s", false); err != nil {
			t.Fatal(err)
		}
	}
	tomb, err := s.DeleteSession(ctx, "s", 3)
	if err != nil || tomb != 3 {
		t.Fatalf("delete: %d %v", tomb, err)
	}
	_, err = s.DeleteSession(ctx, "s", 3)
	wantErr(t, err, core.ErrSessionNotFound)
	_, err = s.Resume(ctx, "s", false)
	wantErr(t, err, core.ErrSessionNotFound)
	// A stale process cannot re-create it.
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", Epoch: 2})
	wantErr(t, err, core.ErrSessionFenced)
	res := save(t, s, &core.SaveRequest{SessionID: "s"})
	if res.Revision != 1 || res.Epoch != 4 || res.MessageCount != 0 {
		t.Fatalf("re-created: %+v", res)
	}
	// The old history and ledger are gone; the old epoch stays fenced.
	if ms := allMessages(t, s, "s", 1); len(ms) != 0 {
		t.Fatalf("re-created session has old messages %+v", ms)
	}
	_, _, err = s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "w", Output: "x"})
	wantErr(t, err, core.ErrCallUnknown)
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 3})
	wantErr(t, err, core.ErrSessionFenced)
}

func testKeyIsolation(t *testing.T, s core.Store) {
	long := strings.Repeat("x", 512)
	ids := []string{"a", "a.b", "ab", "a:1", "a-", "A", "0"}
	for _, id := range ids {
		create(t, s, id, msg("user", id))
		save(t, s, &core.SaveRequest{SessionID: id, ExpectedRevision: 1, PendingToolUses: []core.ToolUse{
			{ID: "t", Name: "n"}, {ID: "t/1", Name: "n"}, {ID: "t:1", Name: "n"}, {ID: "ü\u00001", Name: "n"}, {ID: long, Name: "n"},
		}})
	}
	// Recording under one session changes nothing of another.
	if _, _, err := s.RecordEffect(ctx, "a", core.Effect{ToolUseID: "t", Output: "a's"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "a", core.Effect{ToolUseID: long, Output: "long"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		ms := allMessages(t, s, id, 0)
		if len(ms) != 1 || ms[0] != msg("user", id) {
			t.Errorf("%s: messages %+v", id, ms)
		}
		_, calls, err := s.PendingToolUses(ctx, id)
		if err != nil || len(calls) != 5 {
			t.Fatalf("%s: calls %+v %v", id, calls, err)
		}
		for _, c := range calls {
			recorded := id == "a" && (c.ID == "t" || c.ID == long)
			if (c.Effect != nil) != recorded {
				t.Errorf("session %s call %q: effect %+v", id, c.ID, c.Effect)
			}
		}
	}
}
