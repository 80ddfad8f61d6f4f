package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// summary returns ListSessions' entry for id.
func summary(t *testing.T, s core.Store, id string) core.SessionSummary {
	t.Helper()
	for _, ss := range listAll(t, s) {
		if ss.SessionID == id {
			return ss
		}
	}
	t.Fatalf("ListSessions does not list %q", id)
	return core.SessionSummary{}
}

// listAll returns every live session ListSessions lists, in id order.
func listAll(t *testing.T, s core.Store) []core.SessionSummary {
	t.Helper()
	sums, err := s.ListSessions(ctx, "", 1000, core.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// testCreateTime checks SessionSummary.CreateTime: set by the first save or
// a fork, kept by later saves, completions and resumes, new after a delete
// and re-create; and that every Checkpoint of the session, of any revision,
// from Checkpoint or Resume, carries the same.
func testCreateTime(t *testing.T, s core.Store) {
	before := time.Now()
	create(t, s, "s", msg("user", "a"))
	after := time.Now()
	first := summary(t, s, "s")
	if first.CreateTime.Before(before.Add(-time.Millisecond)) || first.CreateTime.After(after.Add(time.Millisecond)) {
		t.Fatalf("create time %v, not within [%v, %v]", first.CreateTime, before, after)
	}
	if !first.CreateTime.Equal(first.UpdateTime) {
		t.Fatalf("a new session: create time %v, update time %v", first.CreateTime, first.UpdateTime)
	}
	time.Sleep(5 * time.Millisecond)
	save(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, AppendMessages: []core.Message{msg("assistant", "b")}})
	if _, err := s.Resume(ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	complete(t, s, &core.CompleteRequest{SessionID: "s", Epoch: 2, Status: core.StatusCompleted})
	got := summary(t, s, "s")
	if !got.CreateTime.Equal(first.CreateTime) || !got.UpdateTime.After(got.CreateTime) {
		t.Fatalf("after a save and a completion: create time %v (was %v), update time %v", got.CreateTime, first.CreateTime, got.UpdateTime)
	}
	wantCheckpointCreateTime(t, s, "s", 1, first.CreateTime)
	wantCheckpointCreateTime(t, s, "s", 2, first.CreateTime)
	if cp, err := s.Resume(ctx, "s", false); err != nil || !cp.CreateTime.Equal(first.CreateTime) {
		t.Fatalf("Resume: create time %v, %v; want %v", cp.CreateTime, err, first.CreateTime)
	}

	time.Sleep(5 * time.Millisecond)
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"}); err != nil {
		t.Fatal(err)
	}
	f := summary(t, s, "f")
	if !f.CreateTime.After(first.CreateTime) || !f.CreateTime.Equal(f.UpdateTime) {
		t.Fatalf("fork: create time %v, source's %v, update time %v", f.CreateTime, first.CreateTime, f.UpdateTime)
	}
	wantCheckpointCreateTime(t, s, "f", 1, f.CreateTime)

	if _, err := s.DeleteSession(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	save(t, s, &core.SaveRequest{SessionID: "s"})
	again := summary(t, s, "s")
	if !again.CreateTime.After(got.UpdateTime) {
		t.Fatalf("re-created: create time %v, not after the deleted session's last update %v", again.CreateTime, got.UpdateTime)
	}
	wantCheckpointCreateTime(t, s, "s", 0, again.CreateTime)
}

// wantCheckpointCreateTime checks the CreateTime of revision rev (0: the
// latest) of sessionID.
func wantCheckpointCreateTime(t *testing.T, s core.Store, sessionID string, rev uint64, want time.Time) {
	t.Helper()
	cp, err := s.Checkpoint(ctx, sessionID, rev)
	if err != nil {
		t.Fatal(err)
	}
	if want.IsZero() || !cp.CreateTime.Equal(want) {
		t.Fatalf("the checkpoint of %q at revision %d (asked %d): create time %v, want %v", sessionID, cp.Revision, rev, cp.CreateTime, want)
	}
}

// testSummary checks Store.Summary: ListSessions' entry, unfiltered;
// ErrSessionNotFound for a session never made or deleted.
func testSummary(t *testing.T, s core.Store) {
	create(t, s, "a", msg("user", "x"))
	save(t, s, &core.SaveRequest{SessionID: "a", ExpectedRevision: 1, Labels: map[string]string{"k": "v"},
		PendingToolUses: []core.ToolUse{{ID: "t", Name: "n"}}})
	complete(t, s, &core.CompleteRequest{SessionID: "a", Status: core.StatusFailed})
	got, err := s.Summary(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := summary(t, s, "a")
	if !sameSummary(got, want) || got.Status != core.StatusFailed || got.InDoubtToolUseCount != 1 || got.Labels["k"] != "v" {
		t.Fatalf("Summary %+v, ListSessions %+v", got, want)
	}
	_, err = s.Summary(ctx, "none")
	wantErr(t, err, core.ErrSessionNotFound)
	if _, err := s.DeleteSession(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	_, err = s.Summary(ctx, "a")
	wantErr(t, err, core.ErrSessionNotFound)
}

func sameSummary(a, b core.SessionSummary) bool {
	return a.SessionID == b.SessionID && a.Revision == b.Revision && a.Epoch == b.Epoch && a.Task == b.Task &&
		a.Turn == b.Turn && a.MessageCount == b.MessageCount && a.PendingToolUseCount == b.PendingToolUseCount &&
		a.InDoubtToolUseCount == b.InDoubtToolUseCount && a.Status == b.Status &&
		a.CreateTime.Equal(b.CreateTime) && a.UpdateTime.Equal(b.UpdateTime) && len(a.Labels) == len(b.Labels)
}

// testListByUpdate checks ListSessionsByUpdate: live sessions, the last
// updated first, by each save, completion or fork, not by a delete; pages
// from a cursor without repeats; filters, UpdatedBefore included.
func testListByUpdate(t *testing.T, s core.Store) {
	step := func() { time.Sleep(3 * time.Millisecond) }
	for _, id := range []string{"a", "b", "c", "d"} {
		create(t, s, id)
		step()
	}
	save(t, s, &core.SaveRequest{SessionID: "b", ExpectedRevision: 1})
	step()
	bSaved := summary(t, s, "b").UpdateTime
	complete(t, s, &core.CompleteRequest{SessionID: "a", Status: core.StatusCompleted})
	step()
	if _, err := s.DeleteSession(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "c", NewID: "f"}); err != nil {
		t.Fatal(err)
	}
	list := func(after core.UpdateCursor, limit int, f core.SessionFilter) []core.SessionSummary {
		t.Helper()
		sums, err := s.ListSessionsByUpdate(ctx, after, limit, f)
		if err != nil {
			t.Fatal(err)
		}
		return sums
	}
	ids := func(ss []core.SessionSummary) string {
		var out []string
		for _, x := range ss {
			out = append(out, x.SessionID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(list(core.UpdateCursor{}, 10, core.SessionFilter{})); got != "f,a,b,c" {
		t.Fatalf("by update: %s, want f,a,b,c", got)
	}
	var paged []core.SessionSummary
	for after := (core.UpdateCursor{}); ; {
		page := list(after, 1, core.SessionFilter{})
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = core.UpdateCursor{UpdateTime: page[0].UpdateTime, SessionID: page[0].SessionID}
		if len(paged) > 10 {
			t.Fatal("paging never ends")
		}
	}
	if got := ids(paged); got != "f,a,b,c" {
		t.Fatalf("paged one at a time: %s", got)
	}
	if got := ids(list(core.UpdateCursor{}, 10, core.SessionFilter{Status: core.StatusActive})); got != "f,b,c" {
		t.Fatalf("active: %s", got)
	}
	if got := ids(list(core.UpdateCursor{}, 10, core.SessionFilter{UpdatedBefore: bSaved})); got != "c" {
		t.Fatalf("updated before b's save: %s", got)
	}
	if got := ids(list(core.UpdateCursor{}, 2, core.SessionFilter{})); got != "f,a" {
		t.Fatalf("limit 2: %s", got)
	}
	// A re-created session is listed once, as the newest.
	save(t, s, &core.SaveRequest{SessionID: "d"})
	if got := ids(list(core.UpdateCursor{}, 10, core.SessionFilter{})); got != "d,f,a,b,c" {
		t.Fatalf("after re-creating d: %s", got)
	}
}
