package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// ListThreads implements core.GraphStore: the thread heads after the given
// id, in id (byte) order, that have a checkpoint, by the primary key of
// graph_threads and of graph_checkpoints; a head that cannot be decoded is
// listed with its id only.
func (s *Store) ListThreads(ctx context.Context, after string, limit int) ([]core.GraphThread, error) {
	var out []core.GraphThread
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, "SELECT t.thread_id, t.record FROM "+s.table("graph_threads")+" t"+
			" WHERE t.thread_id > $1 AND EXISTS (SELECT 1 FROM "+s.table("graph_checkpoints")+" c WHERE c.thread_id = t.thread_id)"+
			" ORDER BY t.thread_id LIMIT $2", []byte(after), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var th, rec []byte
			if err := rows.Scan(&th, &rec); err != nil {
				return err
			}
			var h threadRec
			if decodeJSON(rec, &h) != nil {
				out = append(out, core.GraphThread{ThreadID: string(th)})
				continue
			}
			out = append(out, core.GraphThread{ThreadID: string(th), UpdateTime: fromNanos(h.UpdateTime)})
		}
		return rows.Err()
	})
	return out, err
}
