package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// One group commit's transaction, pipelined: its statements are queued in
// one pgx.Batch across requests and sent when a request must read what is
// not read yet, or at the end, so that a group commit of N saves costs two
// round trips, not 2N + 3: BEGIN with the reads that lock every session's
// row in session id order (with each request's request id row and the
// rows of the calls it names), then all the writes with COMMIT.
//
// Each request still runs between a SAVEPOINT and its RELEASE, both
// queued. A request refused before any of its statements was sent is
// dropped from the queue; one refused after is rolled back to its
// savepoint at once. When a statement of the queue fails, PostgreSQL ran the
// statements before it and none after: the failing statement's request is
// rolled back to its savepoint and answered with the failure (or run
// again, for a session created meanwhile by another transaction), and the
// requests after it run again, their earlier runs never having reached the
// database.

// timeoutGrace is how much longer than the statement timeout a call's
// context lasts, so that the server's own timeout (57014) ends a statement
// first: the request is then rolled back to its savepoint and the rest of
// its batch still commits.
const timeoutGrace = 500 * time.Millisecond

// flushBytes is how many bytes of arguments the queue holds before the
// next request's are sent after them, so that the writes of large requests
// go in parts, each within the statement timeout, and the batch's time
// check (runBatch) sees them.
const flushBytes = 1 << 20

// maxRuns bounds the runs of one request that found its session created by
// a concurrent transaction (a unique violation on the session's row).
const maxRuns = 3

// The owners of the statements that are no request's: those that read
// ahead, the transaction's BEGIN (and SET LOCAL), and its COMMIT.
const (
	aheadOwner  = -1
	beginOwner  = -2
	commitOwner = -3
)

// stmtFailure is a queued statement that failed, with the request it was
// queued for (or aheadOwner, beginOwner, commitOwner).
type stmtFailure struct {
	owner int
	err   error
}

// ahead is a session's row, locked, its request id's row and the rows of
// the calls it names, read for the first request of the session in a run
// of pipelined requests.
type ahead struct {
	owner     int
	requestID string
	head      *rowRead
	request   *rowRead
	calls     map[string]*rowRead // by tool use id
}

// groupCommit runs the requests of one transaction.
type groupCommit struct {
	s       *Store
	q       *query
	ops     []*op
	results []error
	runs    []int // runs so far of each request that found its session created meanwhile
	// aheadTo is the end of the run of pipelined requests read ahead; a
	// recovery resets it so that the rows are read afresh.
	aheadAt, aheadTo int
	noAhead          bool // the read ahead failed once: each request reads for itself
	recoveries       int
}

// runBatch runs the requests in one transaction and commits it. It returns
// the results of the requests it ran, the first ones of batch: it commits
// early when half the statement timeout has passed, leaving the rest for
// the next transaction, so that a batch of large requests does not outlast
// the timeout. An error is for the whole transaction, which then committed
// nothing (or, for an *ambiguousCommit, may have).
//
// A batch of requests of the protocol's write rules only runs on the fast
// path first (fast.go); when that sends it back, it runs here, each
// request between its savepoint and its release.
func (s *Store) runBatch(batch []*op) ([]error, error) {
	noAhead := false
	if fastBatch(batch) {
		results, how, err := s.runFast(batch)
		if how == fastDone {
			return results, err
		}
		s.fallbacks.Add(1)
		noAhead = how == fastFallbackNoAhead
	}
	return s.runSlow(batch, noAhead)
}

// runSlow is runBatch on the per-request path; with noAhead, each request
// reads for itself.
func (s *Store) runSlow(batch []*op, noAhead bool) ([]error, error) {
	s.heads.forget(batch) // their changed_xid will not be what the cache holds
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+timeoutGrace)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &beginFailed{err: err}
	}
	defer c.Release()
	tx := &connTx{c: c}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after COMMIT
	q := &query{s: s, tx: tx, queued: &pgx.Batch{}, cur: beginOwner}
	q.queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	if s.pooled {
		q.queue(fmt.Sprintf("SET LOCAL statement_timeout = %d", s.timeout.Milliseconds()))
	}
	g := &groupCommit{s: s, q: q, ops: batch, results: make([]error, len(batch)), runs: make([]int, len(batch)), noAhead: noAhead}
	n, err := g.run(ctx, start)
	if err != nil {
		return nil, err
	}
	return g.results[:n], nil
}

// run runs the requests, then sends the last of their statements with
// COMMIT; it returns how many requests the transaction held.
func (g *groupCommit) run(ctx context.Context, start time.Time) (int, error) {
	n := len(g.ops)
	i := 0
	for {
		for i < n {
			if i > 0 && time.Since(start) > g.s.timeout/2 {
				n = i
				break
			}
			var err error
			if g.ops[i].pipelined && i >= g.aheadTo && !g.noAhead {
				if err = g.readAhead(ctx, i); err != nil {
					if i, err = g.recover(ctx, err); err != nil {
						return 0, err
					}
					continue
				}
			}
			if g.q.size >= flushBytes {
				if err = g.q.send(ctx, ""); err != nil {
					if i, err = g.recover(ctx, err); err != nil {
						return 0, err
					}
					continue
				}
			}
			if i, err = g.runOne(ctx, i); err != nil {
				return 0, err
			}
		}
		g.q.cur = commitOwner
		err := g.q.send(ctx, "COMMIT")
		if err == nil {
			g.s.commits.Add(1)
			return n, nil
		}
		var pe *pgconn.PgError
		f := g.q.failed
		switch {
		case f != nil && f.owner == commitOwner:
			if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || strings.HasPrefix(pe.Code, "23")) {
				return 0, err // refused by the server: rolled back
			}
			return 0, &ambiguousCommit{err}
		case !errors.As(err, &pe):
			return 0, &ambiguousCommit{err} // COMMIT went with them
		}
		if i, err = g.recover(ctx, err); err != nil {
			return 0, err
		}
	}
}

// readAhead locks and reads, in one round trip with the statements queued
// before, the session row of every session in the run of pipelined
// requests from i, with the request id's row and the call rows of the
// first request of each session, inside a savepoint of their own.
func (g *groupCommit) readAhead(ctx context.Context, i int) error {
	q := g.q
	end := i
	for end < len(g.ops) && g.ops[end].pipelined {
		end++
	}
	g.aheadAt, g.aheadTo = i, end
	q.aheads = map[string]*ahead{}
	q.cur = aheadOwner
	q.queue("SAVEPOINT ahead")
	var rs []*rowRead
	for k := i; k < end; k++ {
		o := g.ops[k]
		if k > i && o.sessionID == g.ops[k-1].sessionID {
			continue
		}
		a := &ahead{owner: k, requestID: o.requestID, head: &rowRead{k: sessionKey(o.sessionID), lock: true}}
		rs = append(rs, a.head)
		if o.requestID != "" {
			a.request = &rowRead{k: requestKey(o.sessionID, o.requestID)}
			rs = append(rs, a.request)
		}
		for _, id := range o.toolUseIDs {
			if a.calls == nil {
				a.calls = map[string]*rowRead{}
			}
			if a.calls[id] == nil {
				a.calls[id] = &rowRead{k: ledgerEntryKey(o.sessionID, id)}
				rs = append(rs, a.calls[id])
			}
		}
		q.aheads[o.sessionID] = a
	}
	q.queueReads(rs)
	q.queue("RELEASE SAVEPOINT ahead")
	return q.send(ctx, "")
}

// runOne runs request i once and returns the request to run next: i+1,
// i again, or an earlier one after a recovery. A refusal (a domain error)
// or a failed statement becomes the request's result; an error that breaks
// the transaction is returned as the batch's.
func (g *groupCommit) runOne(ctx context.Context, i int) (next int, batchErr error) {
	o, q := g.ops[i], g.q
	q.cur = i
	mark, sends := len(q.queued.QueuedQueries), q.sends
	q.queue("SAVEPOINT request")
	if !o.pipelined && !o.queues {
		// It may use tx directly: everything before it goes first.
		if err := q.send(ctx, ""); err != nil {
			return g.recover(ctx, err)
		}
	}
	err := o.fn(ctx, q)
	if q.failed != nil {
		return g.recover(ctx, err) // a queued statement failed, of this request or an earlier one
	}
	if err == nil {
		if !strings.HasPrefix(o.sessionID, graphOpPrefix) {
			// For ChangeReader: the session changed in this transaction.
			q.queue("UPDATE "+g.s.table("sessions")+" SET changed_xid = pg_current_xact_id() WHERE session_id = $1", []byte(o.sessionID))
		}
		q.queue("RELEASE SAVEPOINT request")
		g.results[i] = nil
		return i + 1, nil
	}
	var pe *pgconn.PgError
	isPG := errors.As(err, &pe)
	if isPG && txGone(pe) {
		return 0, err // the whole transaction must restart
	}
	if !isPG && !isRefusal(err) {
		return 0, err // a connection error, a timeout: the transaction is lost
	}
	if !isPG && q.sends == sends {
		q.truncate(mark) // refused before anything of it was sent
		g.results[i] = err
		return i + 1, nil
	}
	q.truncate(0) // what it queued since its last send: all its own
	if err := q.rollbackTo(ctx, "request"); err != nil {
		return 0, err
	}
	return g.outcome(ctx, i, err), nil
}

// rollbackTo rolls the transaction back to the savepoint and releases it,
// at once: until then a transaction whose statement failed refuses any
// statement but the rollback, and pgx prepares a batch's statements before
// it sends them. Both go in one simple query, one round trip.
func (q *query) rollbackTo(ctx context.Context, savepoint string) error {
	_, err := q.tx.Conn().PgConn().Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint).ReadAll()
	return err
}

// outcome sets the result of request i, refused or failed with err and
// rolled back to its savepoint, and returns the request to run next: i
// again when another transaction created its session meanwhile.
func (g *groupCommit) outcome(ctx context.Context, i int, err error) int {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505" && g.runs[i]+1 < maxRuns:
		g.runs[i]++
		return i // run again to see the session
	case errors.As(err, &pe):
		g.results[i] = g.s.unavailable(ctx, err)
	default:
		g.results[i] = err
	}
	return i + 1
}

// recover handles err of a send: when a queued statement failed without
// ending the transaction, its request is rolled back to its savepoint and
// answered (or the read ahead is undone), and the requests after it run
// again; it returns the request to run next. Any other error is the
// batch's.
func (g *groupCommit) recover(ctx context.Context, err error) (int, error) {
	q := g.q
	f := q.failed
	q.failed = nil
	var pe *pgconn.PgError
	if f == nil {
		return 0, err
	}
	if f.owner == beginOwner {
		return 0, &beginFailed{err: f.err} // nothing ran: a connection found dead, or refused
	}
	if !errors.As(f.err, &pe) || txGone(pe) {
		return 0, f.err
	}
	if g.recoveries++; g.recoveries > 2*maxRuns*len(g.ops)+2 {
		return 0, fmt.Errorf("the group commit did not settle after %d failed statements: %w", g.recoveries, f.err)
	}
	q.aheads, g.aheadTo = nil, 0 // what was read ahead after the failure was not read
	q.truncate(0)
	if f.owner == aheadOwner {
		if err := q.rollbackTo(ctx, "ahead"); err != nil {
			return 0, err
		}
		g.noAhead = true
		return g.aheadAt, nil // its requests read for themselves
	}
	if err := q.rollbackTo(ctx, "request"); err != nil {
		return 0, err
	}
	return g.outcome(ctx, f.owner, f.err), nil
}
