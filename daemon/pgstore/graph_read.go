package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// checkpointRow reads the checkpoint at (thread, ns, id); nil when none.
func (s *Store) checkpointRow(ctx context.Context, tx pgx.Tx, thread, ns, id string) (*graphCheckpointRec, []byte, error) {
	var rec, data []byte
	var sum int64
	err := tx.QueryRow(ctx, "SELECT record, data, checksum FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3",
		[]byte(thread), []byte(ns), []byte(id)).Scan(&rec, &data, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var c graphCheckpointRec
	if err := gdecode(thread, "graph_checkpoints", rec, data, sum, &c, ns, id); err != nil {
		return nil, nil, err
	}
	return &c, data, nil
}

// tupleOf is the tuple of the checkpoint c stored at (thread, ns, id),
// with data its value's bytes, before its blobs and writes are read.
func tupleOf(thread, ns, id string, c *graphCheckpointRec, data []byte) *core.GraphTuple {
	return &core.GraphTuple{Checkpoint: core.GraphCheckpoint{
		ThreadID: thread, NS: ns, ID: id, ParentID: c.ParentID,
		Value:           core.GraphValue{Type: c.Type, Size: int64(len(data)), Data: data},
		ChannelVersions: c.ChannelVersions, MetadataJSON: c.MetadataJSON,
	}}
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
	return "SELECT b.channel, b.version, b.record, b.data, b.checksum FROM " + s.table("graph_blobs") +
		" b JOIN unnest($3::bytea[], $4::bytea[]) AS u(channel, version) ON b.channel = u.channel AND b.version = u.version" +
		" WHERE b.thread_id = $1 AND b.ns = $2 ORDER BY b.channel", []any{[]byte(c.ThreadID), []byte(c.NS), chs, vers}
}

// scanBlobs adds the blobs of rows, of blobsQuery, to tp.
func scanBlobs(rows pgx.Rows, tp *core.GraphTuple) error {
	defer rows.Close()
	thread, ns := tp.Checkpoint.ThreadID, tp.Checkpoint.NS
	for rows.Next() {
		var ch, ver, rec, data []byte
		var sum int64
		if err := rows.Scan(&ch, &ver, &rec, &data, &sum); err != nil {
			return err
		}
		var b graphBlobRec
		if err := gdecode(thread, "graph_blobs", rec, data, sum, &b, ns, string(ch), string(ver)); err != nil {
			return err
		}
		tp.Blobs = append(tp.Blobs, core.GraphBlob{Channel: string(ch), Version: string(ver), Value: core.GraphValue{Type: b.Type, Size: int64(len(data)), Data: data}})
	}
	return rows.Err()
}

// writesSQL selects the pending writes of the checkpoint at (thread $1,
// ns $2, id), id being an SQL expression.
func (s *Store) writesSQL(id string) string {
	return "SELECT task_id, idx, record, data, checksum FROM " + s.table("graph_writes") +
		" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = " + id
}

// writeRow is a row of writesSQL, decoded once its checkpoint is known.
type writeRow struct {
	task, rec, data []byte
	idx             int32
	sum             int64
}

func scanWriteRows(rows pgx.Rows) ([]writeRow, error) {
	defer rows.Close()
	var out []writeRow
	for rows.Next() {
		var w writeRow
		if err := rows.Scan(&w.task, &w.idx, &w.rec, &w.data, &w.sum); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// addWrites decodes the rows of tp's checkpoint's writes into tp.
func addWrites(tp *core.GraphTuple, ws []writeRow) error {
	c := tp.Checkpoint
	for _, r := range ws {
		var w graphWriteRec
		if err := gdecode(c.ThreadID, "graph_writes", r.rec, r.data, r.sum, &w, c.NS, c.ID, string(r.task), fmt.Sprint(r.idx)); err != nil {
			return err
		}
		tp.Writes = append(tp.Writes, core.GraphWrite{TaskID: string(r.task), TaskPath: w.TaskPath, Idx: r.idx, Channel: w.Channel,
			Value: core.GraphValue{Type: w.Type, Size: int64(len(r.data)), Data: r.data}})
	}
	core.SortGraphWrites(tp.Writes)
	return nil
}

// tuple reads the blobs and writes of the checkpoint c stored at (thread,
// ns, id).
func (s *Store) tuple(ctx context.Context, tx pgx.Tx, thread, ns, id string, c *graphCheckpointRec, data []byte) (*core.GraphTuple, error) {
	tp := tupleOf(thread, ns, id, c, data)
	if sql, args := s.blobsQuery(tp); sql != "" {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		if err := scanBlobs(rows, tp); err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, s.writesSQL("$3"), []byte(thread), []byte(ns), []byte(id))
	if err != nil {
		return nil, err
	}
	ws, err := scanWriteRows(rows)
	if err != nil {
		return nil, err
	}
	return tp, addWrites(tp, ws)
}

// GetCheckpoint implements core.GraphStore. The tuple is read on one
// snapshot in two round trips (readTuple), and fn runs after its
// transaction has ended.
func (s *Store) GetCheckpoint(ctx context.Context, thread, ns, id string, fn func(*core.GraphTuple) error) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	tctx, cancel := context.WithTimeout(ctx, 4*s.timeout+timeoutGrace)
	defer cancel()
	tp, err := s.readTuple(tctx, thread, ns, id)
	for attempt := 1; attempt < maxAttempts && retryBegin(tctx, err); attempt++ {
		tp, err = s.readTuple(tctx, thread, ns, id) // nothing was read
	}
	switch {
	case err != nil && !graphRefusal(err):
		return false, s.unavailable(ctx, err)
	case err != nil || tp == nil:
		return false, err
	}
	return true, fn(tp)
}

// readTuple reads the tuple at (thread, ns, id), the namespace's latest
// when id is empty, in a read-only REPEATABLE READ transaction of two
// round trips: BEGIN with the checkpoint's row and its writes, then its
// blobs with COMMIT. It returns nil when there is no such checkpoint, and
// a *beginFailed when the first round trip failed short of the server.
func (s *Store) readTuple(ctx context.Context, thread, ns, id string) (*core.GraphTuple, error) {
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
	cpSQL := "SELECT checkpoint_id, record, data, checksum FROM " + s.table("graph_checkpoints") + " WHERE thread_id = $1 AND ns = $2"
	args := []any{[]byte(thread), []byte(ns)}
	idSQL := "$3"
	if id != "" {
		cpSQL += " AND checkpoint_id = $3"
		args = append(args, []byte(id))
	} else {
		cpSQL += " ORDER BY checkpoint_id DESC LIMIT 1"
		idSQL = "(" + strings.Replace(cpSQL, "checkpoint_id, record, data, checksum", "checkpoint_id", 1) + ")"
	}
	var cid, rec, data []byte
	var sum int64
	found := false
	b.Queue(cpSQL, args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&cid, &rec, &data, &sum)
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
	var cr graphCheckpointRec
	if err := gdecode(thread, "graph_checkpoints", rec, data, sum, &cr, ns, string(cid)); err != nil {
		return nil, err
	}
	tp := tupleOf(thread, ns, string(cid), &cr, data)
	if err := addWrites(tp, ws); err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	if sql, args := s.blobsQuery(tp); sql != "" {
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error { return scanBlobs(rows, tp) })
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
	var cbErr error
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
			rec, data, err := s.checkpointRow(ctx, tx, c.thread, c.ns, c.id)
			if err != nil {
				return err
			}
			if rec == nil {
				continue
			}
			tp, err := s.tuple(ctx, tx, c.thread, c.ns, c.id, rec, data)
			if err != nil {
				return err
			}
			if cbErr = fn(tp); cbErr != nil {
				return errCallback
			}
		}
		return nil
	})
	if errors.Is(err, errCallback) {
		return cbErr
	}
	return err
}

// errCallback stands for the error of a read's callback, returned as it is.
var errCallback = errors.New("the callback failed")
