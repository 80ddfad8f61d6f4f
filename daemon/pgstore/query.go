package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// query reads and writes the rows of one transaction: a group commit's, or
// a read's. In a group commit (pipeline.go) its writes are queued, across
// the requests of the transaction, and sent in one round trip with the
// next read through readRows (get, head) or eachLedgerEntry, or at the end, so
// that a read always sees the writes before it; a request that uses tx
// directly reads before it writes, or calls send first.
type query struct {
	s  *Store
	tx pgx.Tx
	// queued holds the writes not sent yet; nil sends each write at once.
	queued *pgx.Batch
	// The group commit's: owners[k] is the request that queued statement
	// k of queued (cur, the request running, when it was queued); sends
	// counts the batches sent; failed is the queued statement that failed
	// in the last send, when one did; aheads holds what was read ahead
	// for the first request of each session (readAhead), by session id.
	owners []int
	size   int // bytes of the queued statements' arguments
	cur    int
	sends  int
	failed *stmtFailure
	aheads map[string]*ahead
	// fast is set on a group commit's fast path (fast.go): reads are
	// served from its rows, writes are staged there, and a statement of
	// the request's own is errNotFast.
	fast *fastTx
}

// exec runs a write, or queues it when the query queues its writes.
func (q *query) exec(ctx context.Context, sql string, args ...any) error {
	if q.fast != nil {
		return errNotFast
	}
	if q.queued != nil {
		q.queue(sql, args...)
		return nil
	}
	_, err := q.tx.Exec(ctx, sql, args...)
	return err
}

// execTag runs a write and returns its command tag: at once, or, when the
// query queues its writes, in one round trip with those queued before it.
func (q *query) execTag(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if q.fast != nil {
		return pgconn.CommandTag{}, errNotFast
	}
	if q.queued == nil {
		return q.tx.Exec(ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	q.queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	return tag, q.flush(ctx)
}

// execCount is exec that adds the number of rows the write affected to *n
// once it has run: at once, or when the queue is sent.
func (q *query) execCount(ctx context.Context, n *int, sql string, args ...any) error {
	if q.fast != nil {
		return errNotFast
	}
	if q.queued == nil {
		tag, err := q.tx.Exec(ctx, sql, args...)
		*n += int(tag.RowsAffected())
		return err
	}
	q.queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { *n += int(ct.RowsAffected()); return nil })
	return nil
}

// direct is a query on tx that sends each statement as it is made.
func (s *Store) direct(tx pgx.Tx) *query { return &query{s: s, tx: tx} }

// queue queues sql for the request running.
func (q *query) queue(sql string, args ...any) *pgx.QueuedQuery {
	q.owners = append(q.owners, q.cur)
	for _, a := range args {
		if b, ok := a.([]byte); ok {
			q.size += len(b)
		}
	}
	return q.queued.Queue(sql, args...)
}

// truncate drops the statements queued from the n-th on.
func (q *query) truncate(n int) {
	q.queued.QueuedQueries = q.queued.QueuedQueries[:n]
	q.owners = q.owners[:n]
}

// send sends the queued writes, and then sql when it is not empty, in one
// round trip; it returns the first error, after which nothing more of them
// ran. The queue is empty afterwards.
func (q *query) send(ctx context.Context, sql string, args ...any) error {
	if q.fast != nil && q.cur >= 0 {
		return errNotFast // a request's own: on the fast path, its writes are not queued
	}
	if q.queued == nil {
		if sql == "" {
			return nil
		}
		_, err := q.tx.Exec(ctx, sql, args...)
		return err
	}
	if sql != "" {
		q.queue(sql, args...)
	}
	return q.flush(ctx)
}

// flush sends the queue in one round trip and empties it. When a statement
// fails, failed is set to it and its owner: PostgreSQL ran the statements
// before it and none after.
func (q *query) flush(ctx context.Context) error {
	b, owners := q.queued, q.owners
	q.queued, q.owners, q.size = &pgx.Batch{}, nil, 0
	if b.Len() == 0 {
		return nil
	}
	ran := 0
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err == nil {
				ran++
			}
			return err
		}
	}
	q.sends++
	err := q.tx.SendBatch(ctx, b).Close()
	if err != nil && ran < len(owners) {
		q.failed = &stmtFailure{owner: owners[ran], err: err}
	}
	return err
}

// read runs fn in a read-only REPEATABLE READ transaction, so that every
// row it reads is of one snapshot, bounded by the statement timeout.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, q *query) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout+timeoutGrace)
	defer cancel()
	err := s.readTx(tctx, fn)
	for attempt := 1; attempt < maxAttempts && retryBegin(tctx, err); attempt++ {
		err = s.readTx(tctx, fn) // fn has not run
	}
	if err != nil && !isRefusal(err) {
		return s.readUnavailable(ctx, err)
	}
	return err
}

// readUnavailable is unavailable for a read: a read that found no host
// at all (the standbys included) is UNAVAILABLE, not NO_WRITABLE_HOST.
func (s *Store) readUnavailable(ctx context.Context, err error) error {
	if ctx.Err() == nil && isConnectFailure(err) {
		return fmt.Errorf("%w: no host of PostgreSQL (%s) accepts a connection: %v", core.ErrUnavailable, s.target, err)
	}
	return s.unavailable(ctx, err)
}

// retryBegin reports whether err is of a BEGIN that failed (beginFailed)
// while ctx still has time: the call runs again on another connection.
func retryBegin(ctx context.Context, err error) bool {
	var bf *beginFailed
	return errors.As(err, &bf) && ctx.Err() == nil && !pgconn.Timeout(err)
}

// readTx runs fn in a read-only transaction on the pool, or, while no host
// accepts writes, on a standby (Store.standbys): what a synchronous
// standby serves was committed, though it may lag the primary that was.
func (s *Store) readTx(ctx context.Context, fn func(ctx context.Context, q *query) error) error {
	err := s.readTxOn(ctx, s.pool, fn)
	if s.standbys != nil && isConnectFailure(err) {
		err = s.readTxOn(ctx, s.standbys, fn)
	}
	return err
}

func (s *Store) readTxOn(ctx context.Context, pool *pgxpool.Pool, fn func(ctx context.Context, q *query) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return &beginFailed{err: err}
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	if err := s.setLocalTimeout(ctx, tx); err != nil {
		return err
	}
	if err := fn(ctx, &query{s: s, tx: tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// rowRead is one row to read by its key: its record and checksum, and
// whether it exists.
type rowRead struct {
	k     rowKey
	lock  bool // FOR UPDATE
	found bool
	rec   []byte
	sum   int64
	// withData reads the row's data column too, into data (the graph
	// tables').
	withData bool
	data     []byte
}

// readRows reads rs, in order, after the queued writes, all in one round
// trip.
func (q *query) readRows(ctx context.Context, rs ...*rowRead) error {
	if q.fast != nil {
		return q.fast.read(ctx, q, rs)
	}
	if q.queued == nil {
		b := &pgx.Batch{}
		for _, r := range rs {
			r.queue(q.s, b)
		}
		return q.tx.SendBatch(ctx, b).Close()
	}
	q.queueReads(rs)
	return q.flush(ctx)
}

// queueReads queues the reads of rs for the request running.
func (q *query) queueReads(rs []*rowRead) {
	for _, r := range rs {
		q.owners = append(q.owners, q.cur)
		r.queue(q.s, q.queued)
	}
}

// queue queues r's read in b.
func (r *rowRead) queue(s *Store, b *pgx.Batch) {
	cols, dest := "record, checksum", []any{&r.rec, &r.sum}
	if r.withData {
		cols, dest = "record, data, checksum", []any{&r.rec, &r.data, &r.sum}
	}
	sql := "SELECT " + cols + " FROM " + s.table(r.k.table) + " WHERE " + r.k.where()
	if r.lock {
		sql += " FOR UPDATE"
	}
	b.Queue(sql, r.k.args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(dest...)
		r.found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // not the batch's error: pgx drops its cached statements after one
		}
		return err
	})
}

// decode decodes the row read into v; found is false when there was none.
// A row that fails its checksum or does not decode is core.ErrCheckpointCorrupt, with
// h's revision and epoch when the session's head is known.
func (r *rowRead) decode(h *sessionRec, sessionID string, v any) (found bool, err error) {
	if !r.found {
		return false, nil
	}
	if err := decode(r.k.table, r.k.sum, r.rec, r.sum, v); err != nil {
		return false, corrupt(h, sessionID, err)
	}
	return true, nil
}

// get reads the row of table at key into v, as rowRead.decode does.
func (q *query) get(ctx context.Context, h *sessionRec, sessionID string, k rowKey, v any, forUpdate bool) (found bool, err error) {
	r := &rowRead{k: k, lock: forUpdate}
	if err := q.readRows(ctx, r); err != nil {
		return false, err
	}
	return r.decode(h, sessionID, v)
}

// put writes v as the row of table at key, replacing the row there; with
// insert it fails (23505) when the row exists, at once or when sent.
func (q *query) put(ctx context.Context, k rowKey, v any, insert bool) error {
	rec, err := encode(v)
	if err != nil {
		return err
	}
	cols := strings.Join(k.cols, ", ")
	args := append(slices.Clip(k.args), rec, checksum(k.table, k.sum, rec))
	ph := ""
	for i := range k.args {
		ph += fmt.Sprintf("$%d, ", i+1)
	}
	extra, extraPh, extraSet := "", "", ""
	if h, ok := v.(*sessionRec); ok {
		// A head's row carries its index by update time (ListSessionsByUpdate);
		// a tombstone's is NULL.
		var neg *int64
		if !h.Deleted {
			n := -h.UpdateTime
			neg = &n
		}
		args = append(args, neg)
		extra, extraPh, extraSet = ", neg_update_ns", fmt.Sprintf(", $%d", len(args)), ", neg_update_ns = excluded.neg_update_ns"
	}
	if q.fast != nil {
		w := &rowWrite{k: k, rec: rec, sum: args[len(k.args)+1].(int64), insert: insert}
		if len(args) > len(k.args)+2 {
			w.neg = args[len(k.args)+2].(*int64)
		}
		return q.fast.write(w)
	}
	sql := fmt.Sprintf("INSERT INTO %s (%s, record, checksum%s) VALUES (%s$%d, $%d%s)", q.s.table(k.table), cols, extra, ph, len(k.args)+1, len(k.args)+2, extraPh)
	if !insert {
		sql += fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET record = excluded.record, checksum = excluded.checksum%s", cols, extraSet)
	}
	return q.exec(ctx, sql, args...)
}

// rowKey is the key of one row: its SQL values (args, for cols) and the
// bytes its checksum covers (sum).
type rowKey struct {
	table string
	cols  []string
	args  []any
	sum   [][]byte
}

func (k rowKey) where() string {
	var b strings.Builder
	for i, c := range k.cols {
		if i > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "%s = $%d", c, i+1)
	}
	return b.String()
}

func sessionKey(sessionID string) rowKey {
	return rowKey{"sessions", []string{"session_id"}, []any{[]byte(sessionID)}, [][]byte{[]byte(sessionID)}}
}

func revisionKey(sessionID string, rev uint64) rowKey {
	return rowKey{"revisions", []string{"session_id", "revision"}, []any{[]byte(sessionID), int64(rev)}, [][]byte{[]byte(sessionID), u64key(rev)}}
}

func messageKey(sessionID string, seq uint64) rowKey {
	return rowKey{"messages", []string{"session_id", "seq"}, []any{[]byte(sessionID), int64(seq)}, [][]byte{[]byte(sessionID), u64key(seq)}}
}

func ledgerEntryKey(sessionID, toolUseID string) rowKey {
	return rowKey{"calls", []string{"session_id", "tool_use_id"}, []any{[]byte(sessionID), []byte(toolUseID)}, [][]byte{[]byte(sessionID), []byte(toolUseID)}}
}

func requestKey(sessionID, requestID string) rowKey {
	return rowKey{"requests", []string{"session_id", "request_id"}, []any{[]byte(sessionID), []byte(requestID)}, [][]byte{[]byte(sessionID), []byte(requestID)}}
}

// head returns the session's row, or nil when it does not exist or is a
// tombstone; tomb returns the tombstone. lock takes the row's lock (FOR
// UPDATE) for the rest of the transaction. The rows of with are read after
// it, under its lock, in the same round trip.
func (q *query) head(ctx context.Context, sessionID string, lock bool, with ...*rowRead) (live, tomb *sessionRec, err error) {
	r := &rowRead{k: sessionKey(sessionID), lock: lock}
	if err := q.readRows(ctx, append([]*rowRead{r}, with...)...); err != nil {
		return nil, nil, err
	}
	return r.sessionHead(sessionID)
}

// ahead returns what was read ahead for the request running, on its
// session and request id, once; nil when nothing was.
func (q *query) ahead(sessionID, requestID string) *ahead {
	a := q.aheads[sessionID]
	if a == nil || a.owner != q.cur || a.requestID != requestID {
		return nil
	}
	delete(q.aheads, sessionID)
	return a
}

// sessionHead decodes the session's row read by r as head does.
func (r *rowRead) sessionHead(sessionID string) (live, tomb *sessionRec, err error) {
	var rec sessionRec
	found, err := r.decode(nil, sessionID, &rec)
	if err != nil || !found {
		return nil, nil, err
	}
	if rec.Deleted {
		return nil, &rec, nil
	}
	return &rec, nil, nil
}

func (q *query) mustHead(ctx context.Context, sessionID string, lock bool) (*sessionRec, error) {
	h, _, err := q.head(ctx, sessionID, lock)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, core.NotFound(sessionID)
	}
	return h, nil
}

// messagesPerInsert bounds the rows of one INSERT of putMessages (four
// parameters each, well under PostgreSQL's 65,535).
const messagesPerInsert = 1000

// putMessages writes msgs as the messages first, first+1, ... of the
// session, in as few statements as messagesPerInsert allows.
func (q *query) putMessages(ctx context.Context, sessionID string, first uint64, msgs []core.Message) error {
	if q.fast != nil {
		for i, m := range msgs {
			k := messageKey(sessionID, first+uint64(i))
			rec, err := encode(&messageRec{Role: m.Role, ContentJSON: m.ContentJSON})
			if err != nil {
				return err
			}
			if err := q.fast.write(&rowWrite{k: k, rec: rec, sum: checksum(k.table, k.sum, rec)}); err != nil {
				return err
			}
		}
		return nil
	}
	for len(msgs) > 0 {
		n := min(len(msgs), messagesPerInsert)
		var sql strings.Builder
		fmt.Fprintf(&sql, "INSERT INTO %s (session_id, seq, record, checksum) VALUES ", q.s.table("messages"))
		args := make([]any, 0, 4*n)
		for i, m := range msgs[:n] {
			k := messageKey(sessionID, first+uint64(i))
			rec, err := encode(&messageRec{Role: m.Role, ContentJSON: m.ContentJSON})
			if err != nil {
				return err
			}
			if i > 0 {
				sql.WriteString(", ")
			}
			fmt.Fprintf(&sql, "($%d, $%d, $%d, $%d)", len(args)+1, len(args)+2, len(args)+3, len(args)+4)
			args = append(args, k.args[0], k.args[1], rec, checksum(k.table, k.sum, rec))
		}
		sql.WriteString(" ON CONFLICT (session_id, seq) DO UPDATE SET record = excluded.record, checksum = excluded.checksum")
		if err := q.exec(ctx, sql.String(), args...); err != nil {
			return err
		}
		msgs, first = msgs[n:], first+uint64(n)
	}
	return nil
}

func (q *query) putHead(ctx context.Context, sessionID string, h *sessionRec, insert bool) error {
	return q.put(ctx, sessionKey(sessionID), h, insert)
}

func (q *query) revision(ctx context.Context, sessionID string, h *sessionRec, rev uint64) (*revisionRec, error) {
	if rev == 0 {
		rev = h.Revision
	}
	if rev > h.Revision {
		return nil, &core.StateError{Err: core.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q has no revision %d; its latest is %d", sessionID, rev, h.Revision)}
	}
	var rec revisionRec
	found, err := q.get(ctx, h, sessionID, revisionKey(sessionID, rev), &rec, false)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &core.StateError{Err: core.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q no longer keeps revision %d", sessionID, rev)}
	}
	return &rec, nil
}

func (q *query) ledgerEntry(ctx context.Context, sessionID string, h *sessionRec, toolUseID string, c *ledgerEntryRec) (bool, error) {
	return q.get(ctx, h, sessionID, ledgerEntryKey(sessionID, toolUseID), c, false)
}

func (q *query) putLedgerEntry(ctx context.Context, sessionID, toolUseID string, c *ledgerEntryRec) error {
	return q.put(ctx, ledgerEntryKey(sessionID, toolUseID), c, false)
}

func corrupt(h *sessionRec, sessionID string, err error) error {
	if h == nil {
		return core.Corrupt(nil, sessionID, err)
	}
	return core.Corrupt(&core.HeadRecord{Revision: h.Revision, Epoch: h.Epoch}, sessionID, err)
}

// keyedRow is a row of a query that selects one key column, then the record
// and its checksum.
type keyedRow struct {
	key, rec []byte
	sum      int64
}

// keyedRows runs such a query and reads every row it returns.
func (q *query) keyedRows(ctx context.Context, sql string, args ...any) ([]keyedRow, error) {
	rows, err := q.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyedRow, error) {
		var k keyedRow
		err := r.Scan(&k.key, &k.rec, &k.sum)
		return k, err
	})
}
