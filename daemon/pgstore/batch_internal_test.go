package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestBatchRefusalIsolated folds good and refused requests into one
// transaction, as the group commit does under load: each refused request is
// rolled back to its savepoint and its neighbours commit, in every query
// exec mode.
func TestBatchRefusalIsolated(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range []string{"cache_statement", "simple_protocol", "exec"} {
		for _, pipelined := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipelined=%v", mode, pipelined), func(t *testing.T) {
				testBatchRefusalIsolated(t, srv.URL("postgres", "default_query_exec_mode="+mode), fmt.Sprintf("batch_%s_%v", mode, pipelined), pipelined)
			})
		}
	}
}

// testBatchRefusalIsolated runs the batch with its requests through the
// protocol's rules pipelined, or each on its own round trips.
func testBatchRefusalIsolated(t *testing.T, url, schema string, pipelined bool) {
	s, err := Open(context.Background(), url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "old"}); err != nil {
		t.Fatal(err)
	}
	var ops []*op
	results := make([]core.SaveResult, 8)
	for i := range 8 {
		req := &core.SaveRequest{SessionID: fmt.Sprintf("s%d", i), AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}
		if i%2 == 1 { // refused: a session that exists, then one that does not
			req = &core.SaveRequest{SessionID: "old"}
			if i%4 == 3 {
				req = &core.SaveRequest{SessionID: fmt.Sprintf("missing%d", i), ExpectedRevision: 1}
			}
		}
		ops = append(ops, &op{sessionID: req.SessionID, done: make(chan error, 1), pipelined: pipelined, fn: func(ctx context.Context, q *query) error {
			var err error
			results[i], err = core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	// A statement that fails inside a request is rolled back to its
	// savepoint too, without aborting the transaction.
	ops = append(ops, &op{sessionID: "zz", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		_, err := q.tx.Exec(ctx, "SELECT 1/0")
		return err
	}})
	// So is one that fails among a request's queued writes, sent with its
	// RELEASE SAVEPOINT: the save before it in that request is undone, and
	// the request after it commits.
	ops = append(ops, &op{sessionID: "zy", done: make(chan error, 1), pipelined: pipelined, fn: func(ctx context.Context, q *query) error {
		if _, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "zy"}, s.now()); err != nil {
			return err
		}
		return q.exec(ctx, "SELECT 1/0")
	}})
	ops = append(ops, &op{sessionID: "zzz", done: make(chan error, 1), pipelined: pipelined, fn: func(ctx context.Context, q *query) error {
		_, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "zzz"}, s.now())
		return err
	}})
	s.commitBatch(ops)
	for i, o := range ops {
		err := <-o.done
		switch {
		case i == 8 || i == 9:
			if !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("failed statement %d: %v, want ErrUnavailable", i, err)
			}
		case i == 10:
			if err != nil {
				t.Errorf("request after the failed one: %v", err)
			}
		case i%2 == 0:
			if err != nil || results[i].Revision != 1 {
				t.Errorf("request %d: %+v %v", i, results[i], err)
			}
		case i%4 == 1:
			if !errors.Is(err, core.ErrSessionExists) {
				t.Errorf("request %d: %v, want ErrSessionExists", i, err)
			}
		default:
			if !errors.Is(err, core.ErrSessionNotFound) {
				t.Errorf("request %d: %v, want ErrSessionNotFound", i, err)
			}
		}
	}
	for i := 0; i < 8; i += 2 {
		ms, err := s.Messages(ctx, fmt.Sprintf("s%d", i), 0, 0, 1<<20, 0)
		if err != nil || len(ms) != 1 {
			t.Errorf("s%d after the batch: %+v %v", i, ms, err)
		}
	}
	if _, err := s.Checkpoint(ctx, "zzz", 0); err != nil {
		t.Errorf("zzz after the batch: %v", err)
	}
	for _, id := range []string{"missing3", "missing7", "zy"} {
		if _, err := s.Checkpoint(ctx, id, 0); !errors.Is(err, core.ErrSessionNotFound) {
			t.Errorf("%s exists after its refused save: %v", id, err)
		}
	}
}

// TestBatchSplitByTime: a batch whose requests together outlast the
// statement timeout is committed in parts, each within it, and every
// request succeeds.
func TestBatchSplitByTime(t *testing.T) {
	srv := pgtest.Shared(t)
	s := openShortTimeout(t, srv.URL("postgres"), "batch_split", 200*time.Millisecond)
	defer s.Close()
	var ops []*op
	for i := range 12 { // 12 x 80 ms, over the 700 ms a transaction may take
		req := &core.SaveRequest{SessionID: fmt.Sprintf("s%02d", i)}
		ops = append(ops, &op{sessionID: req.SessionID, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
			if _, err := q.tx.Exec(ctx, "SELECT pg_sleep(0.08)"); err != nil {
				return err
			}
			_, err := core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	sums, err := s.ListSessions(context.Background(), "", 100, core.SessionFilter{})
	if err != nil || len(sums) != 12 {
		t.Fatalf("%d sessions after the batch (%v), want 12", len(sums), err)
	}
}

// openShortTimeout opens schema with a short statement timeout, after
// creating it with the default one: a migration under the short timeout
// fails on a loaded machine.
func openShortTimeout(t *testing.T, url, schema string, timeout time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(context.Background(), url, Options{Schema: schema, StatementTimeout: timeout}); err != nil {
		t.Fatal(err)
	}
	return s
}

// batchTrips counts the queries and batches the store sends (n, round
// trips), and the statements in them (stmts).
type batchTrips struct{ n, stmts atomic.Int64 }

func (r *batchTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	r.stmts.Add(1)
	return ctx
}

func (r *batchTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *batchTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *batchTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	r.stmts.Add(1)
}
func (r *batchTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestBatchRoundTrips: a group commit of n saves with request ids costs
// two round trips whatever n: BEGIN with the session rows locked and read
// with the request ids' rows, then every request's writes and COMMIT.
// Requests not pipelined still cost two each. On the fast path (fast.go)
// the statements do not grow with n either: BEGIN, SET LOCAL
// plan_cache_mode, one SELECT for the session rows and one for the request
// id rows, one INSERT each for the heads, revisions, messages and request
// ids, and COMMIT.
func TestBatchRoundTrips(t *testing.T) {
	srv := pgtest.Shared(t)
	rt := &batchTrips{}
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "batch_trips", Tracer: rt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		n         int
		pipelined bool
		msgBytes  int
		want      int64
		stmts     int64 // 0: not counted
	}{
		// Each session's save follows its creation by this store: the head
		// cache (headcache.go) serves the batch in one round trip, BEGIN,
		// SET LOCAL, the check, 4 writes (the session rows' returning the
		// transaction's id) and COMMIT.
		{1, true, 1, 1, 8}, {16, true, 1, 1, 8}, {4, false, 1, 1 + 2*4, 0},
		// Over flushBytes, the queue goes before the next request's
		// writes: after the second and the fourth save of 600 KB, each
		// time one statement per table.
		{5, true, 600 << 10, 3, 3 + 3*4 + 1},
	} {
		var ops []*op
		for i := range tc.n {
			sid := fmt.Sprintf("s%v-%d-%d-%d", tc.pipelined, tc.n, tc.msgBytes, i)
			if _, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{SessionID: sid}); err != nil {
				t.Fatal(err)
			}
			req := &core.SaveRequest{SessionID: sid, ExpectedRevision: 1, Epoch: 1, RequestID: "r",
				AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + strings.Repeat("x", tc.msgBytes) + `"`}}}
			ops = append(ops, &op{sessionID: sid, done: make(chan error, 1), pipelined: tc.pipelined, requestID: req.RequestID,
				fn: func(ctx context.Context, q *query) error {
					_, err := core.Save(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
					return err
				}})
		}
		before, stmts, fallbacks := rt.n.Load(), rt.stmts.Load(), s.fallbacks.Load()
		s.commitBatch(ops)
		for i, o := range ops {
			if err := <-o.done; err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if got := rt.n.Load() - before; got != tc.want {
			t.Errorf("%d round trips for %d saves in one batch (pipelined %v), want %d", got, tc.n, tc.pipelined, tc.want)
		}
		if got := rt.stmts.Load() - stmts; tc.stmts != 0 && got != tc.stmts {
			t.Errorf("%d statements for %d saves of %d bytes in one batch, want %d", got, tc.n, tc.msgBytes, tc.stmts)
		}
		if got := s.fallbacks.Load() - fallbacks; got != 0 {
			t.Errorf("%d saves in one batch (pipelined %v) left the fast path", tc.n, tc.pipelined)
		}
		for _, o := range ops {
			if r, err := s.Checkpoint(context.Background(), o.sessionID, 0); err != nil || r.Revision != 2 {
				t.Errorf("%s after the batch: revision %d, %v; want 2", o.sessionID, r.Revision, err)
			}
		}
	}
}

// TestBatchSameSession: pipelined requests of one session in one batch
// each see the writes of those before it, though only the first had its
// rows read ahead: a create, a save on it, a retry of that save (its
// request id replayed), a pending call begun and its effect recorded, in
// one transaction. On the fast path the session's row, and the call's, are
// written by several requests, which one INSERT ... ON CONFLICT DO UPDATE
// may not do twice: the last write of each row goes, and the batch does
// not leave the fast path.
func TestBatchSameSession(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range []string{"cache_statement", "simple_protocol", "exec"} {
		t.Run(mode, func(t *testing.T) {
			testBatchSameSession(t, srv.URL("postgres", "default_query_exec_mode="+mode), "batch_same_"+mode)
		})
	}
}

func testBatchSameSession(t *testing.T, url, schema string) {
	s, err := Open(context.Background(), url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := []core.Message{{Role: "user", ContentJSON: `"x"`}}
	reqs := []*core.SaveRequest{
		{SessionID: "s", RequestID: "r1", AppendMessages: msg, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}},
		{SessionID: "s", RequestID: "r2", ExpectedRevision: 1, Epoch: 1, AppendMessages: msg, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}},
		{SessionID: "s", RequestID: "r2", ExpectedRevision: 1, Epoch: 1, AppendMessages: msg, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}},
	}
	var ops []*op
	var saved []core.SaveResult
	for _, req := range reqs {
		saved = append(saved, core.SaveResult{})
		i := len(saved) - 1
		ops = append(ops, &op{sessionID: "s", requestID: req.RequestID, toolUseIDs: []string{"t1"}, pipelined: true, done: make(chan error, 1),
			fn: func(ctx context.Context, q *query) error {
				var err error
				saved[i], err = core.Save(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
				return err
			}})
	}
	ops = append(ops, &op{sessionID: "s", toolUseIDs: []string{"t1"}, pipelined: true, done: make(chan error, 1),
		fn: func(ctx context.Context, q *query) error {
			_, err := core.Begin(&domainTxn{ctx: ctx, q: q}, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1}, s.now())
			return err
		}})
	ops = append(ops, &op{sessionID: "s", toolUseIDs: []string{"t1"}, pipelined: true, done: make(chan error, 1),
		fn: func(ctx context.Context, q *query) error {
			_, _, err := core.Record(&domainTxn{ctx: ctx, q: q}, "s", core.Effect{ToolUseID: "t1", Output: "sent"}, s.now())
			return err
		}})
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := s.fallbacks.Load(); n != 0 {
		t.Errorf("the batch left the fast path %d times", n)
	}
	if saved[1].Revision != 2 || saved[1].MessageCount != 2 || saved[2] != saved[1] {
		t.Errorf("second save %+v, its retry %+v; want revision 2 with 2 messages for both", saved[1], saved[2])
	}
	cp, err := s.Checkpoint(context.Background(), "s", 0)
	if err != nil || cp.Revision != 2 || cp.MessageCount != 2 {
		t.Fatalf("after the batch: revision %d, %d messages, %v; want 2, 2", cp.Revision, cp.MessageCount, err)
	}
	if ms, err := s.Messages(context.Background(), "s", 0, 0, 1<<20, 0); err != nil || len(ms) != 2 {
		t.Errorf("messages after the batch: %+v %v; want 2", ms, err)
	}
	e, already, err := s.RecordEffect(context.Background(), "s", core.Effect{ToolUseID: "t1", Output: "sent"})
	if err != nil || !already || e.Output != "sent" {
		t.Errorf("the effect after the batch: %+v already %v, %v; want it recorded", e, already, err)
	}
}

// TestWritersFollowPool: the group commits in flight default to the pool's
// size less one, kept for reads, and an explicit Writers grows the pool.
func TestWritersFollowPool(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, tc := range []struct {
		extra            string
		writers          int
		wantW, wantConns int
	}{{"pool_max_conns=9", 0, 8, 9}, {"pool_max_conns=2", 0, 1, 2}, {"pool_max_conns=2", 5, 5, 6}} {
		s, err := Open(context.Background(), srv.URL("postgres", tc.extra), Options{Schema: "batch_writers", Writers: tc.writers})
		if err != nil {
			t.Fatal(err)
		}
		if s.writers != tc.wantW || int(s.pool.Config().MaxConns) != tc.wantConns {
			t.Errorf("%s, Writers %d: %d writers, %d connections; want %d, %d", tc.extra, tc.writers, s.writers, s.pool.Config().MaxConns, tc.wantW, tc.wantConns)
		}
		s.Close()
	}
}

// TestBatchAheadTimesOut: when the read ahead of a group commit waits past
// the statement timeout on a session's row locked elsewhere, that session's
// request fails alone with ErrUnavailable and the others commit.
func TestBatchAheadTimesOut(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	s := openShortTimeout(t, srv.URL("postgres"), "batch_ahead", 300*time.Millisecond)
	defer s.Close()
	for _, sid := range []string{"a", "b"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	lock, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck
	if _, err := lock.Exec(ctx, `SELECT 1 FROM batch_ahead.sessions WHERE session_id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var ops []*op
	for _, sid := range []string{"a", "b"} {
		req := &core.SaveRequest{SessionID: sid, ExpectedRevision: 1, Epoch: 1}
		ops = append(ops, &op{sessionID: sid, pipelined: true, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
			_, err := core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	s.commitBatch(ops)
	if err := <-ops[0].done; !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("the save of the locked session: %v, want ErrUnavailable", err)
	}
	if err := <-ops[1].done; err != nil {
		t.Errorf("the other save: %v", err)
	}
	if cp, err := s.Checkpoint(ctx, "b", 0); err != nil || cp.Revision != 2 {
		t.Errorf("b after the batch: revision %d, %v; want 2", cp.Revision, err)
	}
}

// TestBatchRefusedAfterSend: a request refused after some of its writes
// were sent is rolled back to its savepoint, and the writes it queued
// since are dropped, not sent with the next request's.
func TestBatchRefusedAfterSend(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	for _, pipelined := range []bool{false, true} {
		s, err := Open(ctx, srv.URL("postgres"), Options{Schema: fmt.Sprintf("batch_refused_%v", pipelined)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		put := func(ctx context.Context, q *query, sid string) error {
			return q.putHead(ctx, sid, headRecOf(&core.HeadRecord{Epoch: 1}), true)
		}
		ops := []*op{
			{sessionID: "a", pipelined: pipelined, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
				if err := put(ctx, q, "a1"); err != nil {
					return err
				}
				if err := q.send(ctx, ""); err != nil {
					return err
				}
				if err := put(ctx, q, "a2"); err != nil {
					return err
				}
				return fmt.Errorf("%w: refused after a send.", core.ErrInvalidArgument)
			}},
			{sessionID: "b", pipelined: pipelined, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
				_, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "b"}, s.now())
				return err
			}},
		}
		s.commitBatch(ops)
		if err := <-ops[0].done; !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("pipelined %v: the refused request: %v, want ErrInvalidArgument", pipelined, err)
		}
		if err := <-ops[1].done; err != nil {
			t.Errorf("pipelined %v: the next request: %v", pipelined, err)
		}
		for _, sid := range []string{"a1", "a2"} {
			var n int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.table("sessions")+" WHERE session_id = $1", []byte(sid)).Scan(&n); err != nil || n != 0 {
				t.Errorf("pipelined %v: %d rows of %s after its request was refused (%v), want 0", pipelined, n, sid, err)
			}
		}
		if _, err := s.Checkpoint(ctx, "b", 0); err != nil {
			t.Errorf("pipelined %v: b after the batch: %v", pipelined, err)
		}
	}
}

// TestBatchFastFallback: when a statement of the fast path fails (here a
// trigger refuses one save's message), the transaction is rolled back and
// the batch runs again on the per-request path: the failing save alone is
// answered with ErrUnavailable, and every other request, two of one
// session among them, commits with its own result.
func TestBatchFastFallback(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range []string{"cache_statement", "simple_protocol", "exec"} {
		t.Run(mode, func(t *testing.T) {
			testBatchFastFallback(t, srv.URL("postgres", "default_query_exec_mode="+mode), "batch_fallback_"+mode)
		})
	}
}

func testBatchFastFallback(t *testing.T, url, schema string) {
	ctx := context.Background()
	s, err := Open(ctx, url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, stmt := range []string{
		`CREATE FUNCTION ` + schema + `.boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF position('boom' in convert_from(NEW.record, 'UTF8')) > 0 THEN RAISE EXCEPTION 'boom'; END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER boom BEFORE INSERT OR UPDATE ON ` + schema + `.messages FOR EACH ROW EXECUTE FUNCTION ` + schema + `.boom()`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	sids := []string{"a", "b", "b", "c", "d"}
	for _, sid := range []string{"a", "b", "c", "d"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	results := make([]core.SaveResult, len(sids))
	var ops []*op
	for i, sid := range sids {
		content := `"fine"`
		if sid == "c" {
			content = `"boom"`
		}
		rev := uint64(1)
		if i == 2 {
			rev = 2 // b's second save, on its first
		}
		req := &core.SaveRequest{SessionID: sid, ExpectedRevision: rev, Epoch: 1, RequestID: fmt.Sprintf("r%d", i),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: content}}}
		ops = append(ops, &op{sessionID: sid, requestID: req.RequestID, pipelined: true, done: make(chan error, 1),
			fn: func(ctx context.Context, q *query) error {
				var err error
				results[i], err = core.Save(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
				return err
			}})
	}
	s.commitBatch(ops)
	for i, o := range ops {
		err := <-o.done
		switch {
		case sids[i] == "c":
			if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "boom") {
				t.Errorf("the save refused by the trigger: %v, want ErrUnavailable with boom", err)
			}
		case err != nil:
			t.Errorf("request %d (%s): %v", i, sids[i], err)
		case results[i].Revision != map[bool]uint64{false: 2, true: 3}[i == 2]:
			t.Errorf("request %d (%s): revision %d", i, sids[i], results[i].Revision)
		}
	}
	if n := s.fallbacks.Load(); n != 1 {
		t.Errorf("the batch left the fast path %d times, want 1", n)
	}
	for sid, want := range map[string]uint64{"a": 2, "b": 3, "c": 1, "d": 2} {
		if cp, err := s.Checkpoint(ctx, sid, 0); err != nil || cp.Revision != want {
			t.Errorf("%s after the batch: revision %d, %v; want %d", sid, cp.Revision, err, want)
		}
	}
}

// TestBatchFastRefusals: on the fast path, requests refused by the rules
// are answered with their refusals and the others commit, without leaving
// the fast path; a request refused after it staged writes (a save whose
// pending call has its effect recorded already, refused after its
// messages) has none of them committed.
func TestBatchFastRefusals(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.URL("postgres"), Options{Schema: "batch_fast_refusals"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := []core.Message{{Role: "user", ContentJSON: `"x"`}}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "e", AppendMessages: msg,
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "e", core.Effect{ToolUseID: "t1", Output: "sent"}); err != nil {
		t.Fatal(err)
	}
	reqs := []*core.SaveRequest{
		{SessionID: "a", AppendMessages: msg},
		{SessionID: "e", AppendMessages: msg}, // exists: ErrSessionExists
		{SessionID: "e", ExpectedRevision: 1, Epoch: 1, AppendMessages: msg, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}},
		{SessionID: "m", ExpectedRevision: 1}, // missing: ErrSessionNotFound
		{SessionID: "z", AppendMessages: msg},
	}
	want := []error{nil, core.ErrSessionExists, core.ErrCallAlreadyRecorded, core.ErrSessionNotFound, nil}
	var ops []*op
	for _, req := range reqs {
		ops = append(ops, &op{sessionID: req.SessionID, pipelined: true, done: make(chan error, 1), toolUseIDs: []string{"t1"},
			fn: func(ctx context.Context, q *query) error {
				_, err := core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
				return err
			}})
	}
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; !errors.Is(err, want[i]) || (err == nil) != (want[i] == nil) {
			t.Errorf("request %d (%s): %v, want %v", i, reqs[i].SessionID, err, want[i])
		}
	}
	if n := s.fallbacks.Load(); n != 0 {
		t.Errorf("the batch left the fast path %d times", n)
	}
	for sid, want := range map[string]int{"a": 1, "e": 1, "m": 0, "z": 1} {
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.table("messages")+" WHERE session_id = $1", []byte(sid)).Scan(&n); err != nil || n != want {
			t.Errorf("%s: %d messages after the batch (%v), want %d", sid, n, err, want)
		}
	}
	if cp, err := s.Checkpoint(ctx, "e", 0); err != nil || cp.Revision != 1 {
		t.Errorf("e after the batch: revision %d, %v; want 1", cp.Revision, err)
	}
}

// TestBatchFastSplitByTime: on the fast path too, a batch whose requests
// together outlast half the statement timeout is committed in parts, each
// its own transaction, and every request succeeds.
func TestBatchFastSplitByTime(t *testing.T) {
	srv := pgtest.Shared(t)
	s := openShortTimeout(t, srv.URL("postgres"), "batch_fast_split", 200*time.Millisecond)
	defer s.Close()
	var ops []*op
	for i := range 6 { // 6 x 60 ms in the rules, over the 100 ms a fast path runs them before it commits
		req := &core.SaveRequest{SessionID: fmt.Sprintf("s%02d", i)}
		ops = append(ops, &op{sessionID: req.SessionID, pipelined: true, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
			time.Sleep(60 * time.Millisecond)
			_, err := core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	commits := s.commits.Load()
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if n := s.commits.Load() - commits; n < 2 {
		t.Errorf("%d transactions for the batch, want it split", n)
	}
	if n := s.fallbacks.Load(); n != 0 {
		t.Errorf("the batch left the fast path %d times", n)
	}
	sums, err := s.ListSessions(context.Background(), "", 100, core.SessionFilter{})
	if err != nil || len(sums) != 6 {
		t.Fatalf("%d sessions after the batch (%v), want 6", len(sums), err)
	}
}
