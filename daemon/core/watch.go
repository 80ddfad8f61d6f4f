package core

import (
	"container/heap"
	"context"
	"errors"
	"maps"
	"time"
)

// WatchRequest is one WatchSessions call, already validated.
type WatchRequest struct {
	// Filter selects the sessions watched, as ListSessions' does; its
	// UpdatedBefore is ignored: MinIdle is applied at each evaluation.
	Filter SessionFilter
	// MinIdle keeps only sessions not updated for at least this long; 0:
	// any.
	MinIdle time.Duration
	// Heartbeat is how often a heartbeat is sent.
	Heartbeat time.Duration
}

// WatchEventKind says what a WatchEvent reports.
type WatchEventKind int

const (
	// WatchChanged: the session changed, or reached MinIdle, and the
	// filter selects it; Summary holds it.
	WatchChanged WatchEventKind = iota + 1
	// WatchRemoved: the session changed and the filter does not select
	// it (deleted, or no longer matching).
	WatchRemoved
	// WatchHeartbeat: nothing else to send. The first event of a watch.
	WatchHeartbeat
	// WatchResync: changes were dropped; the watcher reads afresh.
	WatchResync
)

// WatchEvent is one event of a watch.
type WatchEvent struct {
	Kind      WatchEventKind
	SessionID string
	Summary   SessionSummary // for WatchChanged
}

// SelectsSummary reports whether the filter, but for UpdatedBefore, selects
// a session summarised by s. A damaged session (a summary holding only its
// id) is always selected, as ListSessions lists it.
func (f SessionFilter) SelectsSummary(s SessionSummary) bool {
	if s.Revision == 0 {
		return true
	}
	switch {
	case f.Status != StatusAny && s.Status != f.Status:
		return false
	case f.HasPendingToolUses && s.PendingToolUseCount == 0:
		return false
	}
	return HasLabels(s.Labels, f.Labels)
}

// Watch sends send the events of a watch of s's sessions through hub until
// ctx ends or send fails, and returns why: first a heartbeat, once the watch
// is registered, then, for each session whose change is durable, its
// summary when req's filter selects it and its removal when it does not
// (each only when it differs from what this watch sent of the session
// last), a heartbeat every req.Heartbeat without other events, and a
// session's summary again when, without a change, its idle time reaches
// req.MinIdle. A session's change is read after the change: a burst of
// changes to one session may be sent as one event.
func Watch(ctx context.Context, s Store, hub *Hub, req WatchRequest, send func(WatchEvent) error) error {
	w := hub.Watch()
	defer w.Close()
	if err := send(WatchEvent{Kind: WatchHeartbeat}); err != nil {
		return err
	}
	ws := &watchState{s: s, req: req, send: send, sent: map[string]SessionSummary{}, due: map[string]time.Time{}}
	if req.MinIdle > 0 {
		if err := ws.seedIdle(ctx); err != nil {
			return err
		}
	}
	beat := time.NewTicker(req.Heartbeat)
	defer beat.Stop()
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		idle.Reset(ws.nextDue())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Ready():
			ids, resync := w.Take()
			if resync {
				clear(ws.sent)
				if err := ws.emit(WatchEvent{Kind: WatchResync}); err != nil {
					return err
				}
			}
			for _, id := range ids {
				if err := ws.evaluate(ctx, id); err != nil {
					return err
				}
			}
		case <-idle.C:
			for _, id := range ws.dueNow(time.Now()) {
				if err := ws.evaluate(ctx, id); err != nil {
					return err
				}
			}
		case <-beat.C:
			if !ws.active {
				if err := send(WatchEvent{Kind: WatchHeartbeat}); err != nil {
					return err
				}
			}
			ws.active = false
		}
	}
}

// watchSentMax bounds the summaries a watch remembers to send only what
// changed; past it, it forgets them all, and may send one again.
const watchSentMax = 100_000

// watchState is one watch's state between events.
type watchState struct {
	s      Store
	req    WatchRequest
	send   func(WatchEvent) error
	sent   map[string]SessionSummary // the last event sent per session; a removal as a zero summary
	idle   idleHeap                  // sessions that will reach MinIdle
	due    map[string]time.Time      // each queued session's latest time in idle
	active bool                      // an event was sent since the last heartbeat tick
}

func (ws *watchState) emit(e WatchEvent) error {
	ws.active = true
	return ws.send(e)
}

// evaluate reads sessionID's summary and sends what changed of it.
func (ws *watchState) evaluate(ctx context.Context, sessionID string) error {
	sum, err := ws.s.Summary(ctx, sessionID)
	found := err == nil
	if err != nil && !errors.Is(err, ErrSessionNotFound) {
		return err
	}
	now := time.Now()
	selected := found && ws.req.Filter.SelectsSummary(sum)
	if selected && ws.req.MinIdle > 0 && sum.Revision > 0 && now.Sub(sum.UpdateTime) < ws.req.MinIdle {
		selected = false
		ws.queueIdle(sessionID, sum.UpdateTime.Add(ws.req.MinIdle))
	}
	last, known := ws.sent[sessionID]
	if len(ws.sent) >= watchSentMax {
		clear(ws.sent)
	}
	if !selected {
		if known && last.SessionID == "" {
			return nil // its removal was sent already
		}
		ws.sent[sessionID] = SessionSummary{}
		return ws.emit(WatchEvent{Kind: WatchRemoved, SessionID: sessionID})
	}
	if known && sameSummary(last, sum) {
		return nil
	}
	ws.sent[sessionID] = sum
	return ws.emit(WatchEvent{Kind: WatchChanged, SessionID: sessionID, Summary: sum})
}

func sameSummary(a, b SessionSummary) bool {
	return a.SessionID == b.SessionID && a.Revision == b.Revision && a.Epoch == b.Epoch && a.Task == b.Task &&
		a.Turn == b.Turn && a.MessageCount == b.MessageCount && a.PendingToolUseCount == b.PendingToolUseCount &&
		a.InDoubtToolUseCount == b.InDoubtToolUseCount && a.Status == b.Status &&
		a.CreateTime.Equal(b.CreateTime) && a.UpdateTime.Equal(b.UpdateTime) && maps.Equal(a.Labels, b.Labels)
}

// seedIdle queues every session the filter selects but for MinIdle, which
// reaches MinIdle later: changed before the watch, it will be selected
// without a change. It reads the sessions updated within MinIdle, newest
// first, by the store's index by update time.
func (ws *watchState) seedIdle(ctx context.Context) error {
	f := ws.req.Filter
	f.UpdatedBefore = time.Time{}
	cutoff := time.Now().Add(-ws.req.MinIdle)
	var after UpdateCursor
	for {
		page, err := ws.s.ListSessionsByUpdate(ctx, after, 1000, f)
		if err != nil {
			return err
		}
		for _, sum := range page {
			if !sum.UpdateTime.After(cutoff) {
				return nil // this one and all after it are idle already
			}
			if sum.Revision > 0 {
				ws.queueIdle(sum.SessionID, sum.UpdateTime.Add(ws.req.MinIdle))
			}
		}
		if len(page) < 1000 {
			return nil
		}
		last := page[len(page)-1]
		after = UpdateCursor{UpdateTime: last.UpdateTime, SessionID: last.SessionID}
	}
}

// nextDue is how long until the first queued session reaches MinIdle; an
// hour when none is queued.
func (ws *watchState) nextDue() time.Duration {
	if len(ws.idle) == 0 {
		return time.Hour
	}
	return max(time.Until(ws.idle[0].at), 0)
}

// queueIdle queues sessionID to be evaluated again at when it reaches
// MinIdle, once per time.
func (ws *watchState) queueIdle(sessionID string, at time.Time) {
	if d, ok := ws.due[sessionID]; ok && d.Equal(at) {
		return
	}
	ws.due[sessionID] = at
	heap.Push(&ws.idle, idleAt{id: sessionID, at: at})
}

// dueNow pops the sessions that reached MinIdle by now; an entry a later
// change replaced is skipped.
func (ws *watchState) dueNow(now time.Time) []string {
	var ids []string
	for len(ws.idle) > 0 && !ws.idle[0].at.After(now) {
		e := heap.Pop(&ws.idle).(idleAt)
		if d, ok := ws.due[e.id]; ok && d.Equal(e.at) {
			delete(ws.due, e.id)
			ids = append(ids, e.id)
		}
	}
	return ids
}

// idleAt is when a session reaches MinIdle, unless it changes first.
type idleAt struct {
	id string
	at time.Time
}

// idleHeap orders sessions by when they reach MinIdle.
type idleHeap []idleAt

func (h idleHeap) Len() int           { return len(h) }
func (h idleHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h idleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idleHeap) Push(x any)        { *h = append(*h, x.(idleAt)) }
func (h *idleHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
