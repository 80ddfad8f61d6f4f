package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// watchWithin bounds how long a watch event may take to arrive.
const watchWithin = 5 * time.Second

// watching is a core.Watch running over a store in a goroutine.
type watching struct {
	events chan core.WatchEvent
	done   chan error
	cancel context.CancelFunc
}

// startWatch starts core.Watch of s, whose writes the returned store
// notifies, and waits for its first event, a heartbeat.
func startWatch(t *testing.T, s core.Store, req core.WatchRequest) (*watching, core.Store) {
	t.Helper()
	hub := core.NewHub(s, 50*time.Millisecond)
	wctx, cancel := context.WithCancel(ctx)
	w := &watching{events: make(chan core.WatchEvent, 1000), done: make(chan error, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		w.done <- core.Watch(wctx, s, hub, req, func(e core.WatchEvent) error { w.events <- e; return nil })
	}()
	if e := w.next(t); e.Kind != core.WatchHeartbeat {
		t.Fatalf("first event %+v, want a heartbeat", e)
	}
	return w, &core.Notifying{Store: s, Notify: hub.Changed}
}

// next returns the next event that is not a heartbeat.
func (w *watching) next(t *testing.T) core.WatchEvent {
	t.Helper()
	select {
	case e := <-w.events:
		return e
	case err := <-w.done:
		t.Fatalf("the watch ended: %v", err)
	case <-time.After(watchWithin):
		t.Fatalf("no watch event within %v", watchWithin)
	}
	return core.WatchEvent{}
}

// want fails unless the next event is of kind for session id; it returns
// the event.
func (w *watching) want(t *testing.T, kind core.WatchEventKind, id string) core.WatchEvent {
	t.Helper()
	e := w.next(t)
	if e.Kind != kind || e.SessionID != id {
		t.Fatalf("event %+v, want kind %d for %q", e, kind, id)
	}
	return e
}

// quiet fails if an event arrives within d.
func (w *watching) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case e := <-w.events:
		t.Fatalf("unexpected event %+v", e)
	case <-time.After(d):
	}
}

// testWatch checks core.Watch over the store: each acknowledged write of a
// session the filter selects is sent with its summary, a write that makes
// it leave the filter or deletes it is sent as a removal, a write that
// changes nothing of the summary is not sent again, and the watch ends with
// its context.
func testWatch(t *testing.T, s core.Store) {
	w, ns := startWatch(t, s, core.WatchRequest{Filter: core.SessionFilter{Status: core.StatusActive}, Heartbeat: time.Hour})
	create(t, ns, "a", msg("user", "hi"))
	if e := w.want(t, core.WatchChanged, "a"); e.Summary.Revision != 1 || e.Summary.MessageCount != 1 || e.Summary.CreateTime.IsZero() {
		t.Fatalf("created: %+v", e.Summary)
	}
	save(t, ns, &core.SaveRequest{SessionID: "a", ExpectedRevision: 1, PendingToolUses: []core.ToolUse{{ID: "t", Name: "send", BeginTracked: true}}})
	if e := w.want(t, core.WatchChanged, "a"); e.Summary.Revision != 2 || e.Summary.PendingToolUseCount != 1 || e.Summary.InDoubtToolUseCount != 0 {
		t.Fatalf("saved: %+v", e.Summary)
	}
	// BeginEffect makes no revision but puts the call in doubt.
	if _, err := ns.BeginEffect(ctx, &core.BeginRequest{SessionID: "a", ToolUseID: "t", Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	if e := w.want(t, core.WatchChanged, "a"); e.Summary.Revision != 2 || e.Summary.InDoubtToolUseCount != 1 {
		t.Fatalf("begun: %+v", e.Summary)
	}
	// A refused write sends nothing; nor does a repeat that changes nothing.
	if _, err := ns.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "a", ExpectedRevision: 1}); !errors.Is(err, core.ErrRevisionMismatch) {
		t.Fatalf("stale save: %v", err)
	}
	if _, err := ns.BeginEffect(ctx, &core.BeginRequest{SessionID: "a", ToolUseID: "t", Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	w.quiet(t, 300*time.Millisecond)
	// Completed, it leaves the filter; a fork appears; a delete removes.
	complete(t, ns, &core.CompleteRequest{SessionID: "a", Status: core.StatusCompleted})
	w.want(t, core.WatchRemoved, "a")
	if _, err := ns.ForkSession(ctx, &core.ForkRequest{SourceID: "a", NewID: "f"}); err != nil {
		t.Fatal(err)
	}
	if e := w.want(t, core.WatchChanged, "f"); e.Summary.Status != core.StatusActive || e.Summary.PendingToolUseCount != 1 {
		t.Fatalf("fork: %+v", e.Summary)
	}
	if _, err := ns.DeleteSession(ctx, "f", 0); err != nil {
		t.Fatal(err)
	}
	w.want(t, core.WatchRemoved, "f")
	w.cancel()
	select {
	case err := <-w.done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the watch ended with %v, want context.Canceled", err)
		}
	case <-time.After(watchWithin):
		t.Fatal("the watch did not end with its context")
	}
}

// testWatchIdle checks MinIdle: a session reaching it without a write is
// sent, one created before the watch included; a write makes it leave the
// filter, and it is sent again once idle again. Heartbeats are sent while
// nothing else is.
func testWatchIdle(t *testing.T, s core.Store) {
	const idle = 400 * time.Millisecond
	create(t, s, "old")
	w, ns := startWatch(t, s, core.WatchRequest{MinIdle: idle, Heartbeat: 150 * time.Millisecond})
	skipBeats := func() core.WatchEvent {
		t.Helper()
		for {
			if e := w.next(t); e.Kind != core.WatchHeartbeat {
				return e
			}
		}
	}
	start := time.Now()
	if e := skipBeats(); e.Kind != core.WatchChanged || e.SessionID != "old" {
		t.Fatalf("event %+v, want old reaching min idle", e)
	}
	// Idle is counted from the write, which comes after wrote: not from
	// the receipt of the event that follows it, which a loaded machine may
	// deliver late.
	wrote := time.Now()
	create(t, ns, "new")
	if e := skipBeats(); e.Kind != core.WatchRemoved || e.SessionID != "new" {
		t.Fatalf("event %+v, want new removed (not idle)", e)
	}
	if e := skipBeats(); e.Kind != core.WatchChanged || e.SessionID != "new" || time.Since(wrote) < idle-50*time.Millisecond {
		t.Fatalf("event %+v after %v, want new once idle for %v", e, time.Since(wrote), idle)
	}
	// With nothing to send, heartbeats come at their interval.
	beats := 0
	for deadline := time.After(700 * time.Millisecond); beats < 2; {
		select {
		case e := <-w.events:
			if e.Kind != core.WatchHeartbeat {
				t.Fatalf("event %+v, want a heartbeat", e)
			}
			beats++
		case <-deadline:
			t.Fatalf("%d heartbeats in 700ms at a 150ms interval (watch started %v ago)", beats, time.Since(start))
		}
	}
}
