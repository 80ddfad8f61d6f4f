package pgstore

import (
	"strconv"
	"sync"
)

// The head cache lets a group commit on the fast path (fast.go) skip its
// read ahead, so that the whole transaction is one round trip: BEGIN, a
// check that no other transaction wrote the batch's sessions since this
// daemon last committed them, the writes and COMMIT, sent together.
//
// Every transaction that writes any row of a session sets the session
// row's changed_xid to its own transaction id (the fast path's head write
// or its UPDATE, runOne on the per-request path, delete and branch
// through the same). So a session whose changed_xid is still the id of
// this daemon's last commit of it holds exactly the rows that commit left:
// its head and the call rows it read or wrote, which the cache keeps with
// that id. The check locks the sessions' rows in session id order, as the
// read ahead does, and fails the transaction (a division by zero, before
// anything else of it ran) when any changed_xid differs; the batch then
// runs again with its reads ahead. A request id row is not kept: the cached
// run takes it as absent and inserts it with a plain INSERT, which fails
// when a replay is due, and a request refused on the cached run runs again
// with its reads, since a refusal might have been a replay's answer.

// The head cache's bounds: the sessions and the bytes of records it keeps
// (past either it starts afresh), and the records' bytes of one session
// past which the session is not kept (its calls' outputs can be large).
const (
	maxCachedSessions     = 1 << 14
	maxCachedBytes        = 32 << 20
	maxCachedSessionBytes = 256 << 10
)

// cachedSession is what this daemon's last commit of a session left: the
// commit's transaction id and the session's rows it knew, by rowKey.id,
// whose records are size bytes.
type cachedSession struct {
	xid  uint64
	rows map[string]*rowRead
	size int
}

type headCache struct {
	mu       sync.Mutex
	sessions map[string]*cachedSession
	size     int // bytes of the records of sessions
}

// lookup returns the cached rows of every request's session and the call
// rows it names, with each session's transaction id; ok is false when any
// is missing.
func (c *headCache) lookup(batch []*op) (rows map[string]*rowRead, xids map[string]uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows, xids = map[string]*rowRead{}, map[string]uint64{}
	for _, o := range batch {
		cs := c.sessions[o.sessionID]
		if cs == nil {
			return nil, nil, false
		}
		hk := sessionKey(o.sessionID).id()
		h := cs.rows[hk]
		if h == nil || !h.found {
			return nil, nil, false
		}
		rows[hk] = h
		for _, t := range o.toolUseIDs {
			k := ledgerEntryKey(o.sessionID, t).id()
			r := cs.rows[k]
			if r == nil {
				return nil, nil, false
			}
			rows[k] = r
		}
		xids[o.sessionID] = cs.xid
	}
	return rows, xids, true
}

// forget drops the batch's sessions.
func (c *headCache) forget(batch []*op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range batch {
		c.drop(o.sessionID)
	}
}

// drop drops a session; c.mu is held.
func (c *headCache) drop(sid string) {
	if cs := c.sessions[sid]; cs != nil {
		c.size -= cs.size
		delete(c.sessions, sid)
	}
}

// store keeps the sessions of the batch f's transaction, of id xid,
// committed: their heads and call rows as read ahead and written, with
// xid for the sessions it changed, and for the others (their requests
// refused) the changed_xid read ahead.
func (c *headCache) store(batch []*op, f *fastTx, xid uint64) {
	keep := map[string]*cachedSession{}
	for _, o := range batch {
		if x, ok := f.readXid[o.sessionID]; ok && !f.changedSet[o.sessionID] {
			keep[o.sessionID] = &cachedSession{xid: x, rows: map[string]*rowRead{}}
		}
	}
	for _, sid := range f.changed {
		keep[sid] = &cachedSession{xid: xid, rows: map[string]*rowRead{}}
	}
	add := func(id string, r *rowRead) {
		if r.k.table != "sessions" && r.k.table != "calls" {
			return
		}
		if cs := keep[string(r.k.args[0].([]byte))]; cs != nil {
			cs.rows[id] = r
			cs.size += len(r.rec)
		}
	}
	for id, r := range f.ahead {
		if f.overlay[id] == nil {
			add(id, r)
		}
	}
	for id, w := range f.overlay {
		add(id, &rowRead{k: w.k, found: true, rec: w.rec, sum: w.sum})
	}
	size := 0
	for sid, cs := range keep {
		if cs.size > maxCachedSessionBytes {
			delete(keep, sid)
		} else {
			size += cs.size
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range batch {
		c.drop(o.sessionID)
	}
	if c.sessions == nil || len(c.sessions)+len(keep) > maxCachedSessions || c.size+size > maxCachedBytes {
		c.sessions, c.size = map[string]*cachedSession{}, 0
	}
	for sid, cs := range keep {
		c.sessions[sid] = cs
	}
	c.size += size
}

// queueCheck queues the check of the cached path: it locks the sessions'
// rows in session id order and fails, dividing by zero, unless each has
// the changed_xid its cached rows were left with, and the cached head's
// checksum (so that a head whose checksum was damaged is read, and
// refused, as without the cache).
func (f *fastTx) queueCheck(q *query, batch []*op, xids map[string]uint64) {
	var ids [][]byte
	var xs []string
	var sums []int64
	seen := map[string]bool{}
	for _, o := range batch {
		if !seen[o.sessionID] {
			seen[o.sessionID] = true
			ids = append(ids, []byte(o.sessionID))
			xs = append(xs, strconv.FormatUint(xids[o.sessionID], 10))
			sums = append(sums, f.ahead[sessionKey(o.sessionID).id()].sum)
		}
	}
	// The rows are looked up by the primary key and locked in order; a row
	// changed while its lock was awaited is seen in its new version, which
	// the join then drops.
	q.queue("SELECT 1 / (count(*) = $3)::int FROM (SELECT session_id, changed_xid, checksum FROM "+q.s.table("sessions")+
		" WHERE session_id = ANY($1::bytea[]) ORDER BY session_id FOR UPDATE) AS l JOIN unnest($1::bytea[], $2::text[], $4::int8[]) AS u(id, x, sum)"+
		" ON l.session_id = u.id AND l.changed_xid = u.x::xid8 AND l.checksum = u.sum",
		ids, xs, int64(len(ids)), sums)
}
