package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fast path of a group commit whose requests are all of the protocol's
// write rules (op.pipelined): one multi-row statement per table for the
// whole transaction, and no savepoint per request.
//
// BEGIN goes with one round trip that locks every session's row, in session
// id order, with one SELECT ... WHERE session_id = ANY($1) ORDER BY
// session_id FOR UPDATE, and reads, under those locks, every request id row
// and every call row the requests name, each table with one SELECT. The
// requests then run in memory, one after another: each reads what an
// earlier request of the transaction wrote (the batch's overlay), else what
// was read ahead, else, for a row no one read ahead (a revision), the
// database, which no request of the transaction has written there. A
// request refused by the rules has its writes dropped; the writes of the
// others are coalesced by table, the last write of each row winning (an
// INSERT ... ON CONFLICT DO UPDATE may not touch a row twice), and go with
// COMMIT, each table's as one INSERT ... SELECT FROM unnest(...). The
// changed_xid of a session (ChangeReader) is set by its head's write, or by
// one UPDATE for the sessions whose heads were not written. As on the
// per-request path, once the coalesced records pass flushBytes they go
// before the next request runs (each table's again one statement), and the
// transaction commits early at half the statement timeout.
//
// Any statement of the fast path that fails, and any request that does what
// the fast path does not serve (a statement of its own, a range read, a
// row inserted twice), sends the transaction back: it is rolled back and
// the batch runs again on the per-request path (pipeline.go), whose
// savepoints give each request its own outcome; after a read ahead that
// failed (a row's lock waited past the statement timeout), each request
// there reads for itself.

// errNotFast is what a request does that the fast path does not serve.
var errNotFast = errors.New("pgstore: a request the fast path does not serve")

// fastOwner owns the fast path's coalesced writes.
const fastOwner = -4

// Ways the fast path ends without an outcome: the batch runs on the
// per-request path, after the read ahead failed (noAhead: each request
// then reads for itself) or after anything else.
const (
	fastDone = iota
	fastFallback
	fastFallbackNoAhead
	// fastUncached: the cached path (headcache.go) cannot serve the
	// batch; it runs on the fast path again, with its reads ahead.
	fastUncached
)

// rowWrite is one row written by a request on the fast path.
type rowWrite struct {
	k      rowKey
	id     string
	rec    []byte
	sum    int64
	neg    *int64 // the session rows' neg_update_ns
	insert bool   // fails when the row exists (a session's creation)
}

// fastTx is the state of a fast path's transaction.
type fastTx struct {
	// ahead holds the rows read ahead, found or not, by key (rowKey.id).
	ahead map[string]*rowRead
	// stage holds the writes of the request running, by key, in order.
	stage   []*rowWrite
	stageBy map[string]*rowWrite
	// overlay holds the last write of each row by the requests done.
	overlay map[string]*rowWrite
	// pending holds the coalesced writes not sent yet, by key, in order of
	// their first write.
	pending   []*rowWrite
	pendingBy map[string]*rowWrite
	size      int // bytes of the pending records
	// changed lists the sessions of the requests done, once each; headSet
	// those whose head's write set changed_xid already.
	changed    []string
	changedSet map[string]bool
	headSet    map[string]bool
	// cached is set on the cached path (headcache.go): ahead holds the
	// head cache's rows, nothing was read, and assumed holds the request
	// id rows taken as absent, whose writes are plain INSERTs.
	cached  bool
	assumed map[string]bool
	// readXid holds the changed_xid of each session row read ahead; xid
	// is the transaction's, as its writes of session rows return it.
	readXid map[string]uint64
	xid     uint64
}

// id is the key as a map key: its table and its parts, length-prefixed.
func (k rowKey) id() string {
	var b strings.Builder
	b.WriteString(k.table)
	var n [8]byte
	for _, p := range k.sum {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		b.Write(n[:])
		b.Write(p)
	}
	return b.String()
}

// fastBatch reports whether the batch can take the fast path: every request
// is of the protocol's write rules.
func fastBatch(batch []*op) bool {
	for _, o := range batch {
		if !o.pipelined || strings.HasPrefix(o.sessionID, graphOpPrefix) {
			return false
		}
	}
	return true
}

// runFast runs the batch on the fast path and commits it. It returns the
// results of the requests it ran, as runBatch does, or fastFallback (or
// fastFallbackNoAhead) when the batch must run on the per-request path;
// the transaction is then rolled back.
func (s *Store) runFast(batch []*op) ([]error, int, error) {
	if rows, xids, ok := s.heads.lookup(batch); ok {
		results, how, err := s.runFastOnce(batch, rows, xids)
		if how != fastUncached {
			return results, how, err
		}
		s.uncached.Add(1)
	}
	return s.runFastOnce(batch, nil, nil)
}

// runFastOnce is runFast with its reads ahead, or, given the head cache's
// rows and transaction ids (headcache.go), in one round trip without them;
// that ends in fastUncached when it cannot serve the batch.
func (s *Store) runFastOnce(batch []*op, cached map[string]*rowRead, xids map[string]uint64) (results []error, how int, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+timeoutGrace)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fastDone, &beginFailed{err: err}
	}
	defer c.Release()
	tx := &connTx{c: c}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after COMMIT
	f := &fastTx{ahead: map[string]*rowRead{}, stageBy: map[string]*rowWrite{}, overlay: map[string]*rowWrite{},
		pendingBy: map[string]*rowWrite{}, changedSet: map[string]bool{}, headSet: map[string]bool{}, readXid: map[string]uint64{}}
	defer func() {
		if how != fastDone || err != nil {
			s.heads.forget(batch)
		}
		if f.cached && how == fastFallback {
			how = fastUncached
		}
	}()
	q := s.beginFast(tx, f)
	q.cur = aheadOwner
	if cached != nil {
		f.cached, f.assumed = true, map[string]bool{}
		for id, r := range cached {
			f.ahead[id] = &rowRead{k: r.k, found: r.found, rec: r.rec, sum: r.sum}
		}
		for _, o := range batch {
			if o.requestID != "" {
				k := requestKey(o.sessionID, o.requestID)
				if id := k.id(); f.ahead[id] == nil {
					f.ahead[id], f.assumed[id] = &rowRead{k: k}, true
				}
			}
		}
		f.queueCheck(q, batch, xids)
	} else {
		f.queueAhead(q, batch)
		if err := q.flush(ctx); err != nil {
			how, err := aheadFailed(q, err)
			return nil, how, err
		}
	}
	results, n, how, err := f.runRequests(ctx, q, batch, start, s.timeout/2)
	if how != fastDone || err != nil {
		return nil, how, err
	}
	xid, how, err := s.commitFast(ctx, q, f)
	if how != fastDone || err != nil {
		return nil, how, err
	}
	s.heads.store(batch[:n], f, xid)
	return results[:n], fastDone, nil
}

// beginFast returns the fast path's query on tx, with its BEGIN and the
// transaction's settings queued.
func (s *Store) beginFast(tx *connTx, f *fastTx) *query {
	q := &query{s: s, tx: tx, queued: &pgx.Batch{}, cur: beginOwner, fast: f}
	q.queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	if s.pooled {
		q.queue(fmt.Sprintf("SET LOCAL statement_timeout = %d", s.timeout.Milliseconds()))
	}
	// The statements of the fast path take arrays, for which PostgreSQL
	// would plan each execution anew (a custom plan looks cheaper for the
	// array it is given, about 40 us of planning a statement); their
	// generic plans look keys up by index.
	q.queue("SET LOCAL plan_cache_mode = force_generic_plan")
	return q
}

// aheadFailed is what a failed send of the BEGIN and the reads ahead makes
// of the batch: a failed BEGIN ran nothing; a statement refused (a lock
// waited past the timeout, say) sends the batch to the per-request path
// without reads ahead; anything else is the batch's error.
func aheadFailed(q *query, err error) (int, error) {
	fl := q.failed
	var pe *pgconn.PgError
	switch {
	case fl == nil:
		return fastDone, err
	case fl.owner == beginOwner:
		return fastDone, &beginFailed{err: fl.err} // nothing ran
	case errors.As(fl.err, &pe) && !txGone(pe):
		return fastFallbackNoAhead, nil
	}
	return fastDone, fl.err
}

// runRequests runs the batch's requests in order in the transaction,
// sending the coalesced writes when they grow past flushBytes, and stops
// before a request once budget has passed since start. It returns each
// request's result (a refusal, or nil), how many ran, and, when the batch
// cannot go on, fastFallback or the transaction's error.
func (f *fastTx) runRequests(ctx context.Context, q *query, batch []*op, start time.Time, budget time.Duration) ([]error, int, int, error) {
	results := make([]error, len(batch))
	for i, o := range batch {
		if i > 0 && time.Since(start) > budget {
			return results, i, fastDone, nil
		}
		if f.size >= flushBytes {
			// The writes so far go first, so that a batch of large requests
			// goes in parts, each within the statement timeout.
			f.queuePending(q, false)
			if err := q.flush(ctx); err != nil {
				how, err := f.failedSend(q, err)
				return nil, 0, how, err
			}
		}
		q.cur = i
		err := o.fn(ctx, q)
		var pe *pgconn.PgError
		switch {
		case err == nil && f.unverified(o):
			return nil, 0, fastUncached, nil // it may be a replay's answer
		case err == nil:
			f.done(o.sessionID)
		case errors.Is(err, errNotFast):
			return nil, 0, fastFallback, nil
		case errors.As(err, &pe):
			if txGone(pe) {
				return nil, 0, fastDone, err // the whole transaction must restart
			}
			return nil, 0, fastFallback, nil // a read failed: the transaction is aborted
		case isRefusal(err) && f.cached:
			return nil, 0, fastUncached, nil // it may be a replay's answer
		case isRefusal(err):
			f.drop()
			results[i] = err
		default:
			return nil, 0, fastDone, err // a connection error, a timeout: the transaction is lost
		}
	}
	return results, len(batch), fastDone, nil
}

// commitFast sends the pending writes and COMMIT, and returns the
// transaction's id. A refusal by the server rolled the transaction back; a
// COMMIT whose answer was lost is an ambiguousCommit; a refused write
// before it is what failedSend makes of it.
func (s *Store) commitFast(ctx context.Context, q *query, f *fastTx) (uint64, int, error) {
	f.queuePending(q, true)
	q.cur = commitOwner
	err := q.send(ctx, "COMMIT")
	if err == nil {
		s.commits.Add(1)
		return f.xid, fastDone, nil
	}
	var pe *pgconn.PgError
	if fl := q.failed; fl != nil && fl.owner == commitOwner {
		if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || strings.HasPrefix(pe.Code, "23")) {
			return 0, fastDone, err // refused by the server: rolled back
		}
		return 0, fastDone, &ambiguousCommit{err}
	}
	if !errors.As(err, &pe) {
		var pre pgx.ErrPreprocessingBatch
		if fl := q.failed; fl != nil && fl.owner == beginOwner && (pgconn.SafeToRetry(err) || errors.As(err, &pre)) {
			return 0, fastDone, &beginFailed{err: err} // nothing was sent, or prepared only
		}
		return 0, fastDone, &ambiguousCommit{err} // COMMIT went with them
	}
	how, err := f.failedSend(q, err)
	return 0, how, err
}

// failedSend is what a failed send of coalesced writes makes of the batch:
// a statement refused (a session created meanwhile by another transaction,
// say) sends it to the per-request path; a transaction gone, or a
// connection lost, is the batch's error.
func (f *fastTx) failedSend(q *query, err error) (int, error) {
	var pe *pgconn.PgError
	fl := q.failed
	if fl != nil && errors.As(fl.err, &pe) && !txGone(pe) {
		return fastFallback, nil
	}
	if fl != nil {
		return fastDone, fl.err
	}
	return fastDone, err
}

// queueAhead queues the reads ahead: the session rows locked, in session
// id order (the batch's order), then the request id rows and the call rows
// the requests name.
func (f *fastTx) queueAhead(q *query, batch []*op) {
	var sids [][]byte
	var reqS, reqR, callS, callT [][]byte
	seen := map[string]bool{}
	for _, o := range batch {
		k := sessionKey(o.sessionID)
		if id := k.id(); !seen[id] {
			seen[id] = true
			sids = append(sids, []byte(o.sessionID))
			f.ahead[id] = &rowRead{k: k, lock: true}
		}
		if o.requestID != "" {
			k := requestKey(o.sessionID, o.requestID)
			if id := k.id(); !seen[id] {
				seen[id] = true
				reqS, reqR = append(reqS, []byte(o.sessionID)), append(reqR, []byte(o.requestID))
				f.ahead[id] = &rowRead{k: k}
			}
		}
		for _, t := range o.toolUseIDs {
			k := ledgerEntryKey(o.sessionID, t)
			if id := k.id(); !seen[id] {
				seen[id] = true
				callS, callT = append(callS, []byte(o.sessionID)), append(callT, []byte(t))
				f.ahead[id] = &rowRead{k: k}
			}
		}
	}
	found := func(k rowKey, rec []byte, sum int64) {
		if r := f.ahead[k.id()]; r != nil {
			r.found, r.rec, r.sum = true, rec, sum
		}
	}
	q.queue("SELECT session_id, record, checksum, changed_xid::text FROM "+q.s.table("sessions")+
		" WHERE session_id = ANY($1::bytea[]) ORDER BY session_id FOR UPDATE", sids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var sid, rec []byte
			var sum int64
			var xid string
			if err := rows.Scan(&sid, &rec, &sum, &xid); err != nil {
				return err
			}
			found(sessionKey(string(sid)), rec, sum)
			if x, err := strconv.ParseUint(xid, 10, 64); err == nil {
				f.readXid[string(sid)] = x
			}
		}
		return rows.Err()
	})
	pairs := func(table, col string, a, b [][]byte, key func(a, b string) rowKey) {
		if len(a) == 0 {
			return
		}
		// Each key looked up by its index, whatever the table's size: the
		// LIMIT keeps the planner from making it a join (a hash join
		// would scan the whole table).
		q.queue("SELECT u.s, u.k, t.record, t.checksum FROM unnest($1::bytea[], $2::bytea[]) AS u(s, k) CROSS JOIN LATERAL (SELECT record, checksum FROM "+
			q.s.table(table)+" WHERE session_id = u.s AND "+col+" = u.k LIMIT 1) t", a, b).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var sid, k, rec []byte
				var sum int64
				if err := rows.Scan(&sid, &k, &rec, &sum); err != nil {
					return err
				}
				found(key(string(sid), string(k)), rec, sum)
			}
			return rows.Err()
		})
	}
	pairs("requests", "request_id", reqS, reqR, requestKey)
	pairs("calls", "tool_use_id", callS, callT, ledgerEntryKey)
}

// read reads rs for the request running: from its own writes, the batch's,
// what was read ahead, else the database, in one round trip for all such.
func (f *fastTx) read(ctx context.Context, q *query, rs []*rowRead) error {
	var db []*rowRead
	for _, r := range rs {
		id := r.k.id()
		w := f.stageBy[id]
		if w == nil {
			w = f.overlay[id]
		}
		switch a := f.ahead[id]; {
		case w != nil:
			r.found, r.rec, r.sum = true, w.rec, w.sum
		case a != nil:
			r.found, r.rec, r.sum = a.found, a.rec, a.sum
		case r.lock:
			return errNotFast // a row not locked ahead: out of the lock order
		case f.cached:
			return errNotFast // nothing is sent before the check
		default:
			db = append(db, r)
		}
	}
	if len(db) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range db {
		r.queue(q.s, b)
	}
	return q.tx.SendBatch(ctx, b).Close()
}

// write stages a write of the request running.
func (f *fastTx) write(w *rowWrite) error {
	w.id = w.k.id()
	if f.assumed[w.id] {
		w.insert = true // fails when the row exists after all: a replay
	}
	if old := f.stageBy[w.id]; old != nil {
		if w.insert {
			return errNotFast // it exists: the per-request path refuses it
		}
		old.rec, old.sum, old.neg = w.rec, w.sum, w.neg
		return nil
	}
	if w.insert && (f.overlay[w.id] != nil || f.ahead[w.id] != nil && f.ahead[w.id].found) {
		return errNotFast
	}
	f.stage = append(f.stage, w)
	f.stageBy[w.id] = w
	return nil
}

// unverified reports, on the cached path, whether o succeeded without
// writing its request id's row, taken as absent: its plain INSERT is
// what would have shown a replay due, so its answer may be wrong.
func (f *fastTx) unverified(o *op) bool {
	if !f.cached || o.requestID == "" {
		return false
	}
	id := requestKey(o.sessionID, o.requestID).id()
	return f.assumed[id] && f.stageBy[id] == nil && f.overlay[id] == nil
}

// drop drops the writes of the request running, refused.
func (f *fastTx) drop() {
	f.stage = f.stage[:0]
	clear(f.stageBy)
}

// done keeps the writes of the request running, done, coalesced with the
// batch's: the last write of a row wins, and a row the transaction
// inserts stays an INSERT.
func (f *fastTx) done(sessionID string) {
	for _, w := range f.stage {
		if p := f.pendingBy[w.id]; p != nil {
			p.rec, p.sum, p.neg = w.rec, w.sum, w.neg
			f.overlay[w.id] = p
		} else {
			f.pending = append(f.pending, w)
			f.pendingBy[w.id] = w
			f.overlay[w.id] = w
		}
		f.size += len(w.rec)
	}
	f.drop()
	if !f.changedSet[sessionID] {
		f.changedSet[sessionID] = true
		f.changed = append(f.changed, sessionID)
	}
}

// fastTables is the order the coalesced writes go in: the session rows
// first, so that a session created meanwhile elsewhere fails first.
var fastTables = []string{"sessions", "revisions", "messages", "calls", "requests"}

// queuePending queues the pending writes, one statement per table and kind
// (INSERT, or INSERT ... ON CONFLICT DO UPDATE), and empties them; with
// last, it queues the UPDATE of changed_xid for the sessions whose heads
// were not written.
func (f *fastTx) queuePending(q *query, last bool) {
	q.cur = fastOwner
	for _, table := range fastTables {
		for _, insert := range []bool{true, false} {
			var ws []*rowWrite
			for _, w := range f.pending {
				if w.k.table == table && w.insert == insert {
					ws = append(ws, w)
				}
			}
			if len(ws) > 0 {
				f.queueRows(q, ws, insert)
			}
		}
		if table == "sessions" && last {
			var ids [][]byte
			for _, sid := range f.changed {
				if !f.headSet[sid] {
					ids = append(ids, []byte(sid))
				}
			}
			if len(ids) > 0 {
				f.returnXid(q.queue("UPDATE "+q.s.table("sessions")+" SET changed_xid = pg_current_xact_id() WHERE session_id = ANY($1::bytea[])"+
					" RETURNING changed_xid::text", ids))
			}
		}
	}
	f.pending, f.size = nil, 0
	clear(f.pendingBy)
}

// queueRows queues one INSERT ... SELECT FROM unnest(...) of the rows ws,
// all of one table, each key once.
func (f *fastTx) queueRows(q *query, ws []*rowWrite, insert bool) {
	k0 := ws[0].k
	head := k0.table == "sessions"
	cols := strings.Join(k0.cols, ", ")
	var args []any
	var casts []string
	for j := range k0.cols {
		switch k0.args[j].(type) {
		case int64:
			vs := make([]int64, len(ws))
			for i, w := range ws {
				vs[i] = w.k.args[j].(int64)
			}
			args, casts = append(args, vs), append(casts, "int8[]")
		default:
			vs := make([][]byte, len(ws))
			for i, w := range ws {
				vs[i] = w.k.args[j].([]byte)
			}
			args, casts = append(args, vs), append(casts, "bytea[]")
		}
	}
	recs, sums := make([][]byte, len(ws)), make([]int64, len(ws))
	for i, w := range ws {
		recs[i], sums[i] = w.rec, w.sum
	}
	args, casts = append(args, recs, sums), append(casts, "bytea[]", "int8[]")
	extra, extraSel, extraSet := "", "", ""
	if head {
		negs := make([]*int64, len(ws))
		for i, w := range ws {
			negs[i] = w.neg
			f.headSet[string(w.k.args[0].([]byte))] = true
		}
		args, casts = append(args, negs), append(casts, "int8[]")
		extra, extraSel = ", neg_update_ns, changed_xid", ", pg_current_xact_id()"
		extraSet = ", neg_update_ns = excluded.neg_update_ns, changed_xid = excluded.changed_xid"
	}
	ph := make([]string, len(casts))
	for i, c := range casts {
		ph[i] = fmt.Sprintf("$%d::%s", i+1, c)
	}
	sql := fmt.Sprintf("INSERT INTO %s (%s, record, checksum%s) SELECT u.*%s FROM unnest(%s) AS u",
		q.s.table(k0.table), cols, extra, extraSel, strings.Join(ph, ", "))
	if !insert {
		sql += fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET record = excluded.record, checksum = excluded.checksum%s", cols, extraSet)
	}
	if head {
		f.returnXid(q.queue(sql+" RETURNING changed_xid::text", args...))
		return
	}
	q.queue(sql, args...)
}

// returnXid reads the transaction's id from the changed_xid that qq's
// rows return, into f.xid (for the head cache, headcache.go).
func (f *fastTx) returnXid(qq *pgx.QueuedQuery) {
	qq.Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				return err
			}
			x, err := strconv.ParseUint(t, 10, 64)
			if err != nil {
				return err
			}
			f.xid = x
		}
		return rows.Err()
	})
}
