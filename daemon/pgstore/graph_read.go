package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
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

// tuple reads the blobs and writes of the checkpoint c stored at (thread,
// ns, id).
func (s *Store) tuple(ctx context.Context, tx pgx.Tx, thread, ns, id string, c *graphCheckpointRec, data []byte) (*core.GraphTuple, error) {
	tp := &core.GraphTuple{Checkpoint: core.GraphCheckpoint{
		ThreadID: thread, NS: ns, ID: id, ParentID: c.ParentID,
		Value:           core.GraphValue{Type: c.Type, Size: int64(len(data)), Data: data},
		ChannelVersions: c.ChannelVersions, MetadataJSON: c.MetadataJSON,
	}}
	if len(c.ChannelVersions) > 0 {
		channels := slices.Sorted(func(yield func(string) bool) {
			for ch := range c.ChannelVersions {
				if !yield(ch) {
					return
				}
			}
		})
		chs, vers := make([][]byte, len(channels)), make([][]byte, len(channels))
		for i, ch := range channels {
			chs[i], vers[i] = []byte(ch), []byte(c.ChannelVersions[ch])
		}
		rows, err := tx.Query(ctx, "SELECT b.channel, b.version, b.record, b.data, b.checksum FROM "+s.table("graph_blobs")+
			" b JOIN unnest($3::bytea[], $4::bytea[]) AS u(channel, version) ON b.channel = u.channel AND b.version = u.version"+
			" WHERE b.thread_id = $1 AND b.ns = $2 ORDER BY b.channel", []byte(thread), []byte(ns), chs, vers)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var ch, ver, rec, data []byte
			var sum int64
			if err := rows.Scan(&ch, &ver, &rec, &data, &sum); err != nil {
				rows.Close()
				return nil, err
			}
			var b graphBlobRec
			if err := gdecode(thread, "graph_blobs", rec, data, sum, &b, ns, string(ch), string(ver)); err != nil {
				rows.Close()
				return nil, err
			}
			tp.Blobs = append(tp.Blobs, core.GraphBlob{Channel: string(ch), Version: string(ver), Value: core.GraphValue{Type: b.Type, Size: int64(len(data)), Data: data}})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, "SELECT task_id, idx, record, data, checksum FROM "+s.table("graph_writes")+
		" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3", []byte(thread), []byte(ns), []byte(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var task, rec, data []byte
		var idx int32
		var sum int64
		if err := rows.Scan(&task, &idx, &rec, &data, &sum); err != nil {
			return nil, err
		}
		var w graphWriteRec
		if err := gdecode(thread, "graph_writes", rec, data, sum, &w, ns, id, string(task), fmt.Sprint(idx)); err != nil {
			return nil, err
		}
		tp.Writes = append(tp.Writes, core.GraphWrite{TaskID: string(task), TaskPath: w.TaskPath, Idx: idx, Channel: w.Channel,
			Value: core.GraphValue{Type: w.Type, Size: int64(len(data)), Data: data}})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	core.SortGraphWrites(tp.Writes)
	return tp, nil
}

// GetCheckpoint implements core.GraphStore.
func (s *Store) GetCheckpoint(ctx context.Context, thread, ns, id string, fn func(*core.GraphTuple) error) (bool, error) {
	var found bool
	var cbErr error
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		found = false
		if id == "" {
			var top []byte
			err := tx.QueryRow(ctx, "SELECT checkpoint_id FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1 AND ns = $2 ORDER BY checkpoint_id DESC LIMIT 1",
				[]byte(thread), []byte(ns)).Scan(&top)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			id = string(top)
		}
		c, data, err := s.checkpointRow(ctx, tx, thread, ns, id)
		if err != nil || c == nil {
			return err
		}
		tp, err := s.tuple(ctx, tx, thread, ns, id, c, data)
		if err != nil {
			return err
		}
		found = true
		if cbErr = fn(tp); cbErr != nil {
			return errCallback
		}
		return nil
	})
	if errors.Is(err, errCallback) {
		return found, cbErr
	}
	return found, err
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
