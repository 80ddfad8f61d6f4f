package core_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestWatcherQueue checks a watcher's queue: changes coalesce per session in
// the order they first changed, a watcher closed hears nothing more, and one
// that falls more than WatchQueue distinct sessions behind drops them and is
// told to resync, and then hears changes again.
func TestWatcherQueue(t *testing.T) {
	hub := core.NewHub(nil, 0)
	w, closed := hub.Watch(), hub.Watch()
	closed.Close()
	for _, id := range []string{"b", "a", "b"} {
		hub.Changed(id)
	}
	select {
	case <-w.Ready():
	default:
		t.Fatal("Ready has nothing after a change")
	}
	if ids, resync := w.Take(); !slices.Equal(ids, []string{"b", "a"}) || resync {
		t.Fatalf("Take: %v, resync %v", ids, resync)
	}
	if ids, resync := closed.Take(); len(ids) != 0 || resync {
		t.Fatalf("a closed watcher: %v, resync %v", ids, resync)
	}
	for i := range core.WatchQueue + 1 {
		hub.Changed(fmt.Sprint("s", i))
	}
	if ids, resync := w.Take(); len(ids) != 0 || !resync {
		t.Fatalf("past the queue: %d ids, resync %v", len(ids), resync)
	}
	hub.Changed("c")
	if ids, resync := w.Take(); !slices.Equal(ids, []string{"c"}) || resync {
		t.Fatalf("after the resync: %v, resync %v", ids, resync)
	}
	w.Close()
}

// TestWatchResync checks that a watch whose client stops reading while more
// than WatchQueue sessions change sends a resync, and then changes again.
func TestWatchResync(t *testing.T) {
	s, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hub := core.NewHub(s, 0)
	ns := &core.Notifying{Store: s, Notify: hub.Changed}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan core.WatchEvent)
	go core.Watch(ctx, s, hub, core.WatchRequest{Heartbeat: time.Hour}, func(e core.WatchEvent) error {
		select {
		case events <- e:
		case <-ctx.Done():
		}
		return nil
	})
	next := func() core.WatchEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
		return core.WatchEvent{}
	}
	save := func(id string) {
		t.Helper()
		if _, err := ns.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if e := next(); e.Kind != core.WatchHeartbeat {
		t.Fatalf("first event %+v", e)
	}
	save("first")
	// The watch is now blocked sending first's change, unread.
	time.Sleep(100 * time.Millisecond)
	for i := range core.WatchQueue + 1 {
		save(fmt.Sprint("s", i))
	}
	if e := next(); e.Kind != core.WatchChanged || e.SessionID != "first" {
		t.Fatalf("event %+v, want first", e)
	}
	if e := next(); e.Kind != core.WatchResync {
		t.Fatalf("event %+v, want a resync", e)
	}
	save("after")
	if e := next(); e.Kind != core.WatchChanged || e.SessionID != "after" {
		t.Fatalf("event %+v, want after", e)
	}
}

// failingPoller is a ChangePoller whose reads fail while fail is set.
type failingPoller struct {
	core.Store
	fail chan bool // the result of each read after the first: true fails
}

func (p *failingPoller) ChangeReader() core.ChangeReader { return p }

func (p *failingPoller) Changed(ctx context.Context) ([]string, error) {
	select {
	case f := <-p.fail:
		if f {
			return nil, fmt.Errorf("poll failed")
		}
		return []string{"polled"}, nil
	default:
		return nil, nil
	}
}

// TestHubPoll checks a Hub over a ChangePoller: what a poll reads reaches
// the watchers, and after a failed poll, whose changes are unknown, every
// watcher is told to resync.
func TestHubPoll(t *testing.T) {
	p := &failingPoller{fail: make(chan bool)}
	hub := core.NewHub(p, 10*time.Millisecond)
	w := hub.Watch()
	defer w.Close()
	take := func() ([]string, bool) {
		t.Helper()
		select {
		case <-w.Ready():
		case <-time.After(5 * time.Second):
			t.Fatal("nothing from the poll within 5s")
		}
		return w.Take()
	}
	p.fail <- false
	if ids, resync := take(); !slices.Equal(ids, []string{"polled"}) || resync {
		t.Fatalf("after a poll: %v, resync %v", ids, resync)
	}
	p.fail <- true
	p.fail <- false // the next poll succeeds: the failure is reported with it
	if _, resync := take(); !resync {
		t.Fatal("no resync after a failed poll")
	}
}
