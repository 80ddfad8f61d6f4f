package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// WatchQueue is how many distinct changed sessions a watcher holds unsent;
// a watcher that falls further behind drops them and is told to resync.
const WatchQueue = 1024

// DefaultPollInterval is how often a Hub over a ChangePoller reads the
// sessions other processes changed, while anyone watches.
const DefaultPollInterval = time.Second

// ChangePoller is implemented by a Store that other processes write to as
// well, such as a PostgreSQL database shared by several daemons. A Hub
// polls it while anyone watches, so that their changes are watched too.
type ChangePoller interface {
	// ChangeReader returns a reader of the sessions changed from now on.
	ChangeReader() ChangeReader
}

// ChangeReader reads the sessions changed since its previous call.
type ChangeReader interface {
	// Changed returns the ids of the sessions whose changes became durable
	// since the previous call (none on the first, which marks where reading
	// starts); an id may be returned for a change already seen.
	Changed(ctx context.Context) ([]string, error)
}

// Hub tells every watcher of each session that changed: Changed is called
// after each acknowledged write (by a Notifying store) and, when the store
// is a ChangePoller, with what its polls find. It never blocks a writer.
type Hub struct {
	poller    ChangePoller // nil: every write goes through this process
	pollEvery time.Duration

	mu       sync.RWMutex
	watchers map[*Watcher]struct{}
	stopPoll context.CancelFunc // set while the poll runs
}

// NewHub returns a Hub for store's changes; a store that is a ChangePoller
// is polled every pollEvery (0: DefaultPollInterval) while anyone watches.
func NewHub(store Store, pollEvery time.Duration) *Hub {
	h := &Hub{pollEvery: pollEvery, watchers: map[*Watcher]struct{}{}}
	if h.pollEvery <= 0 {
		h.pollEvery = DefaultPollInterval
	}
	if p, ok := store.(ChangePoller); ok {
		h.poller = p
	}
	return h
}

// Changed tells every watcher that sessionID changed.
func (h *Hub) Changed(sessionID string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for w := range h.watchers {
		w.add(sessionID)
	}
}

// resyncAll tells every watcher that changes may have been missed.
func (h *Hub) resyncAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for w := range h.watchers {
		w.overflow()
	}
}

// Watch registers a watcher: every change acknowledged after Watch returns
// reaches it. Close it when done.
func (h *Hub) Watch() *Watcher {
	w := &Watcher{hub: h, queued: map[string]struct{}{}, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[w] = struct{}{}
	if h.poller != nil && h.stopPoll == nil {
		// The reader starts here, under the lock, so that a change durable
		// after Watch returns is polled even from another process.
		r := h.poller.ChangeReader()
		ctx, cancel := context.WithCancel(context.Background())
		h.stopPoll = cancel
		first := make(chan struct{})
		go h.poll(ctx, r, first)
		<-first
	}
	return w
}

// poll reads r every pollEvery until ctx ends; a failed read makes every
// watcher resync, since changes may have been missed. first is closed once
// r has marked where it starts (its first read, tried once).
func (h *Hub) poll(ctx context.Context, r ChangeReader, first chan struct{}) {
	_, err := r.Changed(ctx)
	close(first)
	failed := err != nil
	t := time.NewTicker(h.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids, err := r.Changed(ctx)
		if err != nil {
			failed = true
			continue
		}
		if failed {
			h.resyncAll()
			failed = false
		}
		for _, id := range ids {
			h.Changed(id)
		}
	}
}

// Watcher is one registration with a Hub: the sessions changed since its
// last Take, at most WatchQueue of them.
type Watcher struct {
	hub   *Hub
	ready chan struct{} // holds a value when Take has something

	mu     sync.Mutex
	order  []string
	queued map[string]struct{}
	resync bool
}

func (w *Watcher) add(sessionID string) {
	w.mu.Lock()
	if !w.resync {
		if _, ok := w.queued[sessionID]; !ok {
			if len(w.order) >= WatchQueue {
				w.resync, w.order = true, nil
				clear(w.queued)
			} else {
				w.queued[sessionID] = struct{}{}
				w.order = append(w.order, sessionID)
			}
		}
	}
	w.mu.Unlock()
	w.signal()
}

func (w *Watcher) overflow() {
	w.mu.Lock()
	w.resync, w.order = true, nil
	clear(w.queued)
	w.mu.Unlock()
	w.signal()
}

func (w *Watcher) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Ready receives a value when Take has something to return.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Take returns the sessions changed since the last Take, in the order they
// first changed, or resync true when some were dropped (the watcher fell
// behind, or a poll failed): the caller reads afresh what it shows.
func (w *Watcher) Take() (sessionIDs []string, resync bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids, r := w.order, w.resync
	w.order, w.resync = nil, false
	clear(w.queued)
	return ids, r
}

// Close unregisters the watcher; the poll stops with the last one.
func (w *Watcher) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
	if len(h.watchers) == 0 && h.stopPoll != nil {
		h.stopPoll()
		h.stopPoll = nil
	}
}

// Notifying is a Store that calls Notify with the session each write
// changed, once the write is acknowledged; also after a write whose outcome
// is unknown (ErrUnavailable, or the caller's context ending), since it may
// have committed. Reads pass through.
type Notifying struct {
	Store
	Notify func(sessionID string)
}

// maybeChanged calls Notify unless err refused the write.
func (n *Notifying) maybeChanged(sessionID string, err error) {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		n.Notify(sessionID)
	}
}

func (n *Notifying) SaveCheckpoint(ctx context.Context, req *SaveRequest) (SaveResult, error) {
	res, err := n.Store.SaveCheckpoint(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) BeginEffect(ctx context.Context, req *BeginRequest) (BeginResult, error) {
	res, err := n.Store.BeginEffect(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) ApproveEffect(ctx context.Context, req *ApproveRequest) (ApproveResult, error) {
	res, err := n.Store.ApproveEffect(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) RegisterEffect(ctx context.Context, req *RegisterRequest) (BeginResult, error) {
	res, err := n.Store.RegisterEffect(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) RecordEffect(ctx context.Context, sessionID string, e Effect) (Effect, bool, error) {
	stored, already, err := n.Store.RecordEffect(ctx, sessionID, e)
	n.maybeChanged(sessionID, err)
	return stored, already, err
}

func (n *Notifying) ResolveEffect(ctx context.Context, req *ResolveRequest) (ResolveResult, error) {
	res, err := n.Store.ResolveEffect(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) Resume(ctx context.Context, sessionID string, reopen bool) (Checkpoint, error) {
	cp, err := n.Store.Resume(ctx, sessionID, reopen)
	n.maybeChanged(sessionID, err)
	return cp, err
}

func (n *Notifying) CompleteSession(ctx context.Context, req *CompleteRequest) (CompleteResult, error) {
	res, err := n.Store.CompleteSession(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) ForkSession(ctx context.Context, req *ForkRequest) (BranchResult, error) {
	res, err := n.Store.ForkSession(ctx, req)
	n.maybeChanged(req.NewID, err)
	return res, err
}

func (n *Notifying) RewindSession(ctx context.Context, req *RewindRequest) (BranchResult, error) {
	res, err := n.Store.RewindSession(ctx, req)
	n.maybeChanged(req.SessionID, err)
	return res, err
}

func (n *Notifying) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	tomb, err := n.Store.DeleteSession(ctx, sessionID, epoch)
	n.maybeChanged(sessionID, err)
	return tomb, err
}
