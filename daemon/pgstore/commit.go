package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The group commit: write requests queued while the writers are busy are
// folded into one SQL transaction, with a SAVEPOINT around each request so
// that one refused request (fenced, a revision mismatch, a failed statement)
// is rolled back to its savepoint without aborting its neighbours. Each
// request locks its session's row (SELECT ... FOR UPDATE) before it reads
// anything, so checks and writes are never a read-then-write race, across
// daemons too; the requests of a batch run in session id order, so two
// batches, on one host or two, always lock rows in the same order and cannot
// deadlock. A request is acknowledged only after COMMIT returns.

// maxBatch bounds the requests folded into one transaction.
const maxBatch = 128

// op is one write request, or a Ping when fn is nil.
type op struct {
	sessionID string
	fn        func(ctx context.Context, q *query) error
	done      chan error
}

// write runs fn for sessionID in the next group commit and returns once the
// commit's outcome is known. fn may run more than once (a batch retried
// after a serialization failure): it must set its results afresh each time.
func (s *Store) write(ctx context.Context, sessionID string, fn func(ctx context.Context, q *query) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{sessionID: sessionID, fn: fn, done: make(chan error, 1)}
	if err := s.enqueue(ctx, o); err != nil {
		return err
	}
	// Once queued, the request is answered with its commit's outcome, even
	// when ctx ends first: the batch is bounded by the statement timeout.
	return <-o.done
}

// enqueue queues o for the writers, unless the store is closed; Close sets
// closed under the write lock, so that nothing is queued after its drain.
func (s *Store) enqueue(ctx context.Context, o *op) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) loop() {
	defer s.wg.Done()
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.stop:
			return
		}
		batch := []*op{first}
	fold:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fold
			}
		}
		s.commitBatch(batch)
	}
}

// drain answers the requests still queued at close.
func (s *Store) drain() {
	for {
		select {
		case o := <-s.ops:
			o.done <- fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
		default:
			return
		}
	}
}

// maxAttempts bounds the runs of one batch after serialization failures,
// deadlocks, and connections found dead before anything was sent.
const maxAttempts = 5

func (s *Store) commitBatch(batch []*op) {
	var writes, probes []*op
	for _, o := range batch {
		if o.fn == nil {
			probes = append(probes, o)
		} else {
			writes = append(writes, o)
		}
	}
	// Requests of one session keep their order; sessions go in id order.
	slices.SortStableFunc(writes, func(a, b *op) int { return strings.Compare(a.sessionID, b.sessionID) })
	for len(writes) > 0 {
		var results []error
		var err error
		for attempt := 1; ; attempt++ {
			results, err = s.runBatch(writes)
			if err == nil || attempt == maxAttempts || !retryBatch(err) {
				break
			}
			time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
		}
		if err != nil {
			err = s.unavailable(context.Background(), err)
			for _, o := range writes {
				o.done <- err
			}
			break
		}
		for i, r := range results {
			writes[i].done <- r
		}
		writes = writes[len(results):] // what did not fit in the transaction's time
	}
	for _, o := range probes {
		o.done <- nil // answered after the writes it was folded with
	}
}

// retryBatch reports whether a failed batch committed nothing and can run
// again: a serialization failure or deadlock (the transaction was rolled
// back), or a connection that failed before anything was sent.
func retryBatch(err error) bool {
	var ac *ambiguousCommit
	var bf *beginFailed
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ac), errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return false
	case errors.As(err, &bf):
		return true // no transaction: an idle connection found dead
	case errors.As(err, &pe):
		// A serialization failure or deadlock, or the server ending the
		// connection (admin shutdown, a pooler's or an idle timeout) before
		// COMMIT: the transaction is gone, nothing of it committed.
		return txGone(pe)
	}
	return pgconn.SafeToRetry(err)
}

// txGone reports whether a statement's error ended its whole transaction,
// not only the statement.
func txGone(pe *pgconn.PgError) bool {
	return pe.Code == "40001" || pe.Code == "40P01" || strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
}

// beginFailed marks an error of BEGIN: no transaction ran, so the call can
// run again on another connection. It is how a pooled connection that died
// while idle (PgBouncer or PostgreSQL restarted, an idle timeout) shows;
// pgx marks such errors safe to retry over a Unix socket but not always over
// TCP ("conn closed").
type beginFailed struct{ err error }

func (e *beginFailed) Error() string { return e.err.Error() }
func (e *beginFailed) Unwrap() error { return e.err }

// ambiguousCommit marks an error of COMMIT itself: the transaction may or
// may not have committed.
type ambiguousCommit struct{ err error }

func (e *ambiguousCommit) Error() string { return e.err.Error() }
func (e *ambiguousCommit) Unwrap() error { return e.err }

// runBatch runs the requests in one transaction and commits it. It returns
// the results of the requests it ran, the first ones of batch: it commits
// early when half the statement timeout has passed, leaving the rest for
// the next transaction, so that a batch of large requests does not outlast
// the timeout. An error is for the whole transaction, which then committed
// nothing (or, for an *ambiguousCommit, may have).
func (s *Store) runBatch(batch []*op) ([]error, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+timeoutGrace)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, &beginFailed{err: err}
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if err := s.setLocalTimeout(ctx, tx); err != nil {
		return nil, err
	}
	q := &query{s: s, tx: tx}
	results := make([]error, 0, len(batch))
	for i, o := range batch {
		if len(results) > 0 && time.Since(start) > s.timeout/2 {
			break
		}
		r, err := s.runOne(ctx, q, o, i < len(batch)-1)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || strings.HasPrefix(pe.Code, "23")) {
			return nil, err // refused by the server: rolled back
		}
		return nil, &ambiguousCommit{err}
	}
	s.commits.Add(1)
	return results, nil
}

// timeoutGrace is how much longer than the statement timeout a call's
// context lasts, so that the server's own timeout (57014) ends a statement
// first: the request is then rolled back to its savepoint and the rest of
// its batch still commits.
const timeoutGrace = 500 * time.Millisecond

// maxRuns bounds the runs of one request that found its session created by
// a concurrent transaction (a unique violation on the session's row).
const maxRuns = 3

// runOne runs one request inside a savepoint, its writes queued and sent
// with its RELEASE SAVEPOINT and, when more requests follow, the next one's
// SAVEPOINT. A refusal (a domain error) or a failed statement is rolled
// back to the savepoint and returned as the request's result; an error that
// breaks the transaction is returned as the batch's.
func (s *Store) runOne(ctx context.Context, q *query, o *op, more bool) (result, batchErr error) {
	for run := 1; ; run++ {
		if !q.savepoint {
			if _, err := q.tx.Exec(ctx, "SAVEPOINT request"); err != nil {
				return nil, err
			}
		}
		q.savepoint = false
		q.queued = &pgx.Batch{}
		err := o.fn(ctx, q)
		if err == nil {
			if !strings.HasPrefix(o.sessionID, graphOpPrefix) {
				// For ChangeReader: the session changed in this transaction.
				q.queued.Queue("UPDATE "+s.table("sessions")+" SET changed_xid = pg_current_xact_id() WHERE session_id = $1", []byte(o.sessionID))
			}
			q.queued.Queue("RELEASE SAVEPOINT request")
			if more {
				q.queued.Queue("SAVEPOINT request")
			}
			err = q.send(ctx, "")
			q.savepoint = err == nil && more
		}
		q.queued = nil // the writes of a refused request are dropped
		if err == nil {
			return nil, nil
		}
		var pe *pgconn.PgError
		isPG := errors.As(err, &pe)
		if isPG && txGone(pe) {
			return nil, err // the whole transaction must restart
		}
		if !isPG && !isRefusal(err) {
			return nil, err // a connection error, a timeout: the transaction is lost
		}
		if _, rbErr := q.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT request"); rbErr != nil {
			return nil, rbErr
		}
		if _, rbErr := q.tx.Exec(ctx, "RELEASE SAVEPOINT request"); rbErr != nil {
			return nil, rbErr
		}
		switch {
		case isPG && pe.Code == "23505" && run < maxRuns:
			continue // another transaction created the session: run again to see it
		case isPG:
			return s.unavailable(ctx, err), nil
		default:
			return err, nil
		}
	}
}

// setLocalTimeout sets the statement timeout for the transaction when the
// connection could not be given it at startup (pooled mode).
func (s *Store) setLocalTimeout(ctx context.Context, tx pgx.Tx) error {
	if !s.pooled {
		return nil
	}
	_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", s.timeout.Milliseconds()))
	return err
}

// refusals are the errors a request is refused with; anything else a
// request returns is a failure of the database or the connection.
var refusals = []error{
	core.ErrInvalidArgument, core.ErrNotFound, core.ErrSessionExists, core.ErrFenced,
	core.ErrRevisionMismatch, core.ErrRevisionNotFound, core.ErrRequestIDReused, core.ErrKeepOutOfRange,
	core.ErrCallAlreadyRecorded, core.ErrCallNotPending, core.ErrCallUnknown, core.ErrToolNameMismatch,
	core.ErrEffectConflict, core.ErrCorrupt, core.ErrSessionCompleted,
}

func isRefusal(err error) bool {
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// unavailable translates a failure of the database, the connection or the
// statement timeout into core.ErrUnavailable with what happened; a
// refusal, and the end of the caller's own ctx, pass through.
func (s *Store) unavailable(ctx context.Context, err error) error {
	if err == nil || isRefusal(err) || errors.Is(err, core.ErrUnavailable) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr // the caller's own deadline or cancellation
	}
	var ac *ambiguousCommit
	if errors.As(err, &ac) {
		return fmt.Errorf("%w: the connection to PostgreSQL (%s) failed during COMMIT, so the write may or may not have been committed; "+
			"retry it with the same request id, which is safe: %v", core.ErrUnavailable, s.target, ac.err)
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "57014":
		return fmt.Errorf("%w: PostgreSQL (%s) did not finish the statement within the %v statement timeout: %v",
			core.ErrUnavailable, s.target, s.timeout, err)
	case errors.As(err, &pe):
		return fmt.Errorf("%w: PostgreSQL (%s) failed the statement: %v", core.ErrUnavailable, s.target, err)
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return fmt.Errorf("%w: PostgreSQL (%s) did not answer within the %v statement timeout: %v",
			core.ErrUnavailable, s.target, s.timeout, err)
	default:
		return fmt.Errorf("%w: cannot reach PostgreSQL (%s): %v", core.ErrUnavailable, s.target, err)
	}
}
