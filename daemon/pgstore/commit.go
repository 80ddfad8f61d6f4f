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
// deadlock. A request is acknowledged only after COMMIT returns. The
// transaction's statements are pipelined across its requests
// (pipeline.go): a batch of N saves costs two round trips. A batch of
// requests of the protocol's write rules only goes first on the fast path
// (fast.go): the same two round trips, with one statement per table for
// the whole batch and no savepoint per request; when a statement fails
// there, the transaction is rolled back and the batch runs again on the
// per-request path described here.

// maxBatch bounds the requests folded into one transaction.
const maxBatch = 128

// op is one write request, or a Ping when fn is nil.
type op struct {
	sessionID string
	fn        func(ctx context.Context, q *query) error
	done      chan error
	// pipelined is set for a request whose fn reads only through the
	// query's readRows, get, head or eachLedgerEntry and writes only through
	// exec (a domainTxn): its statements then go with its neighbours' in
	// the group commit's round trips, and its session's row is locked and
	// read ahead (pipeline.go), with requestID's row when set and the rows
	// of the calls of toolUseIDs.
	pipelined bool
	// queues is set for a request whose fn reads and writes only through
	// the query (readRows, exec, execTag, execCount), so that the
	// statements queued before it need not be sent before it runs: they
	// go with its first read.
	queues     bool
	requestID  string
	toolUseIDs []string
}

// write runs fn for sessionID in the next group commit and returns once the
// commit's outcome is known. fn may run more than once (a batch retried
// after a serialization failure): it must set its results afresh each time.
func (s *Store) write(ctx context.Context, sessionID string, fn func(ctx context.Context, q *query) error) error {
	return s.writeOp(ctx, &op{sessionID: sessionID, fn: fn})
}

// writeSession is write for a request of the protocol's write rules on one
// session (a domainTxn of requestID, reading the calls of toolUseIDs): it
// is pipelined with its neighbours (op.pipelined).
func (s *Store) writeSession(ctx context.Context, sessionID, requestID string, toolUseIDs []string, fn func(ctx context.Context, q *query) error) error {
	return s.writeOp(ctx, &op{sessionID: sessionID, fn: fn, pipelined: true, requestID: requestID, toolUseIDs: toolUseIDs})
}

func (s *Store) writeOp(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.done = make(chan error, 1)
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

// isConnectFailure reports whether err is pgx failing to open a connection
// on any host of the URL (down, refusing, or not writable under
// target_session_attrs).
func isConnectFailure(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
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
	core.ErrInvalidArgument, core.ErrSessionNotFound, core.ErrSessionExists, core.ErrSessionFenced,
	core.ErrRevisionMismatch, core.ErrRevisionNotFound, core.ErrRequestIDReused, core.ErrKeepMessagesOutOfRange,
	core.ErrCallAlreadyRecorded, core.ErrCallNotPending, core.ErrCallUnknown, core.ErrToolNameMismatch,
	core.ErrEffectConflict, core.ErrCheckpointCorrupt, core.ErrSessionCompleted,
	core.ErrEffectInputMismatch, core.ErrEffectNotBegun, core.ErrCallNotInDoubt, core.ErrResolutionConflict,
	core.ErrApprovalNotWaiting, core.ErrApprovalConflict, core.ErrApprovalInputMismatch,
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
		return fmt.Errorf("%w: the connection to PostgreSQL (%s) failed after COMMIT was sent, so the write may or may not have been committed; "+
			"retry it with the same request id (or tool use id), which is answered from what was stored or performed once: %v",
			core.ErrCommitOutcomeUnknown, s.target, ac.err)
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "25006", errors.Is(err, pgconn.ErrReadOnlyConnection):
		// read_only_sql_transaction: the host we reached is a standby, or
		// was made read-only. Drop the pool's connections, so that the next
		// ones go through target_session_attrs to the writable host.
		s.pool.Reset()
		return fmt.Errorf("%w: no host of PostgreSQL (%s) accepts writes now (a standby or a read-only server answered; "+
			"a failover may be under way); nothing was written, retry after a backoff: %v", core.ErrNoWritableHost, s.target, err)
	case s.failover && isConnectFailure(err):
		return fmt.Errorf("%w: no host of PostgreSQL (%s) accepts a connection for writes (the primary is down or failing over); "+
			"nothing was written, retry after a backoff: %v", core.ErrNoWritableHost, s.target, err)
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
