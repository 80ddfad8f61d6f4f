package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func checkpointKey(thread, ns, id string) rowKey {
	return rowKey{table: "graph_checkpoints", cols: []string{"thread_id", "ns", "checkpoint_id"},
		args: []any{[]byte(thread), []byte(ns), []byte(id)}, sum: [][]byte{[]byte(ns), []byte(id)}}
}

func blobKey(thread, ns, channel, version string) rowKey {
	return rowKey{table: "graph_blobs", cols: []string{"thread_id", "ns", "channel", "version"},
		args: []any{[]byte(thread), []byte(ns), []byte(channel), []byte(version)}, sum: [][]byte{[]byte(ns), []byte(channel), []byte(version)}}
}

func writeKey(thread, ns, id, task string, idx int32) rowKey {
	return rowKey{table: "graph_writes", cols: []string{"thread_id", "ns", "checkpoint_id", "task_id", "idx"},
		args: []any{[]byte(thread), []byte(ns), []byte(id), []byte(task), idx}, sum: [][]byte{[]byte(ns), []byte(id), []byte(task), []byte(fmt.Sprint(idx))}}
}

// checkpointSQL selects the checkpoint of thread $1 in namespace $2 with
// id $3, the latest when id is empty.
func (s *Store) checkpointSQL(id string) string {
	sql := "SELECT checkpoint_id, record, " + valueSQL("data", graphInlineBytes) + ", checksum FROM " + s.table("graph_checkpoints") + " WHERE thread_id = $1 AND ns = $2"
	if id != "" {
		return sql + " AND checkpoint_id = $3"
	}
	return sql + " ORDER BY checkpoint_id DESC LIMIT 1"
}

// checkpointRow is a row of checkpointSQL.
type checkpointRow struct {
	id, rec []byte
	v       storedValue
	sum     int64
}

func (c *checkpointRow) scan(row pgx.Row) error {
	return row.Scan(&c.id, &c.rec, &c.v.data, &c.v.size, &c.sum)
}

// tuple decodes the row c of the checkpoint of thread in ns, before its
// blobs and writes are read; its value is read through r when large.
func (r *valueReader) tuple(thread, ns string, c *checkpointRow) (*core.GraphTuple, error) {
	id := string(c.id)
	var rec graphCheckpointRec
	value, err := r.decode(thread, checkpointKey(thread, ns, id), c.rec, c.sum, c.v, &rec)
	if err != nil {
		return nil, err
	}
	return &core.GraphTuple{Checkpoint: core.GraphCheckpoint{
		ThreadID: thread, NS: ns, ID: id, ParentID: rec.ParentID, Value: value(rec.Type),
		ChannelVersions: rec.ChannelVersions, MetadataJSON: rec.MetadataJSON,
	}}, nil
}

// blobsQuery is the query of the blobs of tp's channel versions; empty
// when it has none.
func (s *Store) blobsQuery(tp *core.GraphTuple) (string, []any) {
	c := tp.Checkpoint
	if len(c.ChannelVersions) == 0 {
		return "", nil
	}
	channels := slices.Sorted(maps.Keys(c.ChannelVersions))
	chs, vers := make([][]byte, len(channels)), make([][]byte, len(channels))
	for i, ch := range channels {
		chs[i], vers[i] = []byte(ch), []byte(c.ChannelVersions[ch])
	}
	return "SELECT b.channel, b.version, b.record, " + valueSQL("b.data", graphInlineBytes) + ", b.checksum FROM " + s.table("graph_blobs") +
		" b JOIN unnest($3::bytea[], $4::bytea[]) AS u(channel, version) ON b.channel = u.channel AND b.version = u.version" +
		" WHERE b.thread_id = $1 AND b.ns = $2 ORDER BY b.channel", []any{[]byte(c.ThreadID), []byte(c.NS), chs, vers}
}

// scanBlobs adds the blobs of rows, of blobsQuery, to tp; their values are
// read through r when large.
func (r *valueReader) scanBlobs(rows pgx.Rows, tp *core.GraphTuple) error {
	defer rows.Close()
	thread, ns := tp.Checkpoint.ThreadID, tp.Checkpoint.NS
	for rows.Next() {
		var ch, ver, rec []byte
		var v storedValue
		var sum int64
		if err := rows.Scan(&ch, &ver, &rec, &v.data, &v.size, &sum); err != nil {
			return err
		}
		var b graphBlobRec
		value, err := r.decode(thread, blobKey(thread, ns, string(ch), string(ver)), rec, sum, v, &b)
		if err != nil {
			return err
		}
		tp.Blobs = append(tp.Blobs, core.GraphBlob{Channel: string(ch), Version: string(ver), Value: value(b.Type)})
	}
	return rows.Err()
}

// writesSQL selects the pending writes of the checkpoint at (thread $1,
// ns $2, id), id being an SQL expression.
func (s *Store) writesSQL(id string) string {
	return "SELECT task_id, idx, record, " + valueSQL("data", graphInlineBytes) + ", checksum FROM " + s.table("graph_writes") +
		" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = " + id
}

// writeRow is a row of writesSQL, decoded once its checkpoint is known.
type writeRow struct {
	task, rec []byte
	idx       int32
	v         storedValue
	sum       int64
}

func scanWriteRows(rows pgx.Rows) ([]writeRow, error) {
	defer rows.Close()
	var out []writeRow
	for rows.Next() {
		var w writeRow
		if err := rows.Scan(&w.task, &w.idx, &w.rec, &w.v.data, &w.v.size, &w.sum); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// addWrites decodes the rows of tp's checkpoint's writes into tp; their
// values are read through r when large.
func (r *valueReader) addWrites(tp *core.GraphTuple, ws []writeRow) error {
	c := tp.Checkpoint
	for _, row := range ws {
		var w graphWriteRec
		value, err := r.decode(c.ThreadID, writeKey(c.ThreadID, c.NS, c.ID, string(row.task), row.idx), row.rec, row.sum, row.v, &w)
		if err != nil {
			return err
		}
		tp.Writes = append(tp.Writes, core.GraphWrite{TaskID: string(row.task), TaskPath: w.TaskPath, Idx: row.idx, Channel: w.Channel, Value: value(w.Type)})
	}
	core.SortGraphWrites(tp.Writes)
	return nil
}

// readTuple reads, in tx, the tuple of thread in ns with id, the latest
// when id is empty; nil when there is none. Its large values are read
// in tx when asked for.
func (s *Store) readTuple(ctx context.Context, tx pgx.Tx, thread, ns, id string) (*core.GraphTuple, error) {
	args := []any{[]byte(thread), []byte(ns)}
	if id != "" {
		args = append(args, []byte(id))
	}
	var c checkpointRow
	if err := c.scan(tx.QueryRow(ctx, s.checkpointSQL(id), args...)); errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	r := &valueReader{ctx: ctx, tx: tx, s: s}
	tp, err := r.tuple(thread, ns, &c)
	if err != nil {
		return nil, err
	}
	if sql, args := s.blobsQuery(tp); sql != "" {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		if err := r.scanBlobs(rows, tp); err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, s.writesSQL("$3"), []byte(thread), []byte(ns), c.id)
	if err != nil {
		return nil, err
	}
	ws, err := scanWriteRows(rows)
	if err != nil {
		return nil, err
	}
	return tp, r.addWrites(tp, ws)
}

// GetCheckpoint implements core.GraphStore. The tuple is read on one
// snapshot in two round trips (quickTuple) and fn runs after its
// transaction has ended; a tuple with a large value is read again, in a
// transaction that stays open while fn reads its values.
func (s *Store) GetCheckpoint(ctx context.Context, thread, ns, id string, fn func(*core.GraphTuple) error) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	tctx, cancel := context.WithTimeout(ctx, 4*s.timeout+timeoutGrace)
	defer cancel()
	tp, err := s.quickTuple(tctx, thread, ns, id)
	for attempt := 1; attempt < maxAttempts && retryBegin(tctx, err); attempt++ {
		tp, err = s.quickTuple(tctx, thread, ns, id) // nothing was read
	}
	if s.standbys != nil && isConnectFailure(err) {
		err = errHold // no writable host: read on a standby (graphRead)
	}
	if errors.Is(err, errHold) {
		found := false
		err = s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
			tp, err := s.readTuple(ctx, tx, thread, ns, id)
			if err != nil || tp == nil {
				return err
			}
			found = true
			return callback(fn(tp))
		})
		return found, uncallback(err)
	}
	switch {
	case err != nil && !graphRefusal(err):
		return false, s.unavailable(ctx, err)
	case err != nil || tp == nil:
		return false, err
	}
	return true, fn(tp)
}

// quickTuple reads the tuple at (thread, ns, id), the namespace's latest
// when id is empty, in a read-only REPEATABLE READ transaction of two
// round trips: BEGIN with the checkpoint's row and its writes, then its
// blobs with COMMIT. It returns nil when there is no such checkpoint,
// errHold when a value is too large to read with its row, and a
// *beginFailed when the first round trip failed short of the server.
func (s *Store) quickTuple(ctx context.Context, thread, ns, id string) (*core.GraphTuple, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &beginFailed{err: err}
	}
	defer c.Release()
	tx := &connTx{c: c}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only; a no-op after COMMIT
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	if s.pooled {
		b.Queue(fmt.Sprintf("SET LOCAL statement_timeout = %d", s.timeout.Milliseconds()))
	}
	args := []any{[]byte(thread), []byte(ns)}
	idSQL := "$3"
	if id != "" {
		args = append(args, []byte(id))
	} else {
		idSQL = "(SELECT checkpoint_id FROM " + s.table("graph_checkpoints") + " WHERE thread_id = $1 AND ns = $2 ORDER BY checkpoint_id DESC LIMIT 1)"
	}
	var cp checkpointRow
	found := false
	b.Queue(s.checkpointSQL(id), args...).QueryRow(func(row pgx.Row) error {
		err := cp.scan(row)
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	var ws []writeRow
	b.Queue(s.writesSQL(idSQL), args...).Query(func(rows pgx.Rows) error {
		var err error
		ws, err = scanWriteRows(rows)
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) && !pgconn.Timeout(err) {
			return nil, &beginFailed{err: err}
		}
		return nil, err
	}
	if !found {
		return nil, nil
	}
	var r *valueReader // the transaction ends before fn runs
	tp, err := r.tuple(thread, ns, &cp)
	if err != nil {
		return nil, err
	}
	if err := r.addWrites(tp, ws); err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	if sql, args := s.blobsQuery(tp); sql != "" {
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error { return r.scanBlobs(rows, tp) })
	}
	b.Queue("COMMIT")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return tp, nil
}

type graphCandidate struct{ thread, ns, id string }

// ListCheckpoints implements core.GraphStore. The bound and the thread
// and namespace are applied in SQL, the metadata filter in Go (its equality
// is that of core.MetadataMatches), before the limit.
func (s *Store) ListCheckpoints(ctx context.Context, q core.GraphListQuery, fn func(*core.GraphTuple) error) error {
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var where []string
		var args []any
		arg := func(cond string, v []byte) {
			args = append(args, v)
			where = append(where, fmt.Sprintf(cond, len(args)))
		}
		if q.ThreadID != "" {
			arg("thread_id = $%d", []byte(q.ThreadID))
		}
		if q.NS != nil {
			arg("ns = $%d", []byte(*q.NS))
		}
		if q.Before != "" {
			arg("checkpoint_id < $%d", []byte(q.Before))
		}
		sql := "SELECT thread_id, ns, checkpoint_id, record, checksum FROM " + s.table("graph_checkpoints")
		for i, w := range where {
			if i == 0 {
				sql += " WHERE " + w
			} else {
				sql += " AND " + w
			}
		}
		sql += " ORDER BY checkpoint_id DESC, thread_id, ns"
		if q.Limit > 0 && len(q.Filter) == 0 {
			sql += fmt.Sprintf(" LIMIT %d", q.Limit)
		}
		// The record alone is read here; its checksum, which covers the
		// data, is checked when the tuple is read.
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		var cands []graphCandidate
		for rows.Next() {
			var th, ns, id, rec []byte
			var sum int64
			if err := rows.Scan(&th, &ns, &id, &rec, &sum); err != nil {
				rows.Close()
				return err
			}
			if len(q.Filter) > 0 {
				var c graphCheckpointRec
				if err := decodeJSON(rec, &c); err != nil {
					rows.Close()
					return graphCorrupt(string(th), err)
				}
				if !core.MetadataMatches(c.MetadataJSON, q.Filter) {
					continue
				}
			}
			cands = append(cands, graphCandidate{string(th), string(ns), string(id)})
			if q.Limit > 0 && len(cands) == q.Limit {
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range cands {
			tp, err := s.readTuple(ctx, tx, c.thread, c.ns, c.id)
			if err != nil {
				return err
			}
			if tp == nil {
				continue
			}
			if err := callback(fn(tp)); err != nil {
				return err
			}
		}
		return nil
	})
	return uncallback(err)
}

// callbackError carries the error of a read's callback out of the read's
// transaction, to be returned as it is (uncallback).
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// callback wraps err, a read's callback's, in a callbackError; nil stays nil.
func callback(err error) error {
	if err == nil {
		return nil
	}
	return &callbackError{err}
}

// uncallback returns the callback's error err carries, else err.
func uncallback(err error) error {
	if ce, ok := errors.AsType[*callbackError](err); ok {
		return ce.err
	}
	return err
}
