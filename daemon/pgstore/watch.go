package pgstore

import (
	"context"
	"strconv"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// ChangeReader implements core.ChangePoller. Every write of a session sets
// its row's changed_xid to the writing transaction's id (runOne). A read
// takes a snapshot and returns the rows whose changed_xid is at least the
// previous snapshot's xmin: every transaction not visible then, running or
// not yet started, has an id at least that, so none is missed however long
// it ran, while rows seen already (their xid remembered) are not returned
// again.
func (s *Store) ChangeReader() core.ChangeReader {
	return &changeReader{s: s, seen: map[string]uint64{}}
}

type changeReader struct {
	s       *Store
	started bool
	xmin    uint64            // the previous read's snapshot xmin
	seen    map[string]uint64 // changed_xid of the rows returned at or after xmin
}

func (r *changeReader) Changed(ctx context.Context) ([]string, error) {
	var ids []string
	var xmin uint64
	err := r.s.read(ctx, func(ctx context.Context, q *query) error {
		ids = ids[:0]
		var text string
		if err := q.tx.QueryRow(ctx, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text").Scan(&text); err != nil {
			return err
		}
		var err error
		if xmin, err = strconv.ParseUint(text, 10, 64); err != nil {
			return err
		}
		if !r.started {
			return nil
		}
		rows, err := q.tx.Query(ctx, "SELECT session_id, changed_xid::text FROM "+r.s.table("sessions")+
			" WHERE changed_xid >= $1::text::xid8", strconv.FormatUint(r.xmin, 10))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id []byte
			var xid string
			if err := rows.Scan(&id, &xid); err != nil {
				return err
			}
			x, err := strconv.ParseUint(xid, 10, 64)
			if err != nil {
				return err
			}
			if r.seen[string(id)] != x {
				r.seen[string(id)] = x
				ids = append(ids, string(id))
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	r.started, r.xmin = true, xmin
	for id, x := range r.seen {
		if x < xmin {
			delete(r.seen, id) // never read again
		}
	}
	return ids, nil
}
