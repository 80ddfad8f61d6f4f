package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Verify reads every row of the store's tables in one snapshot, checking its
// checksum and decoding, then that each live session's latest revision and
// all of its messages are present. It is bounded by ctx, not by the
// statement timeout.
func (s *Store) Verify(ctx context.Context) (core.VerifyReport, error) {
	var c *core.VerifyCollector
	err := s.verifyTx(ctx, func(ctx context.Context, q *query) error {
		c = &core.VerifyCollector{} // the transaction may run again
		note := c.Note
		heads := map[string]*sessionRec{}
		for _, table := range tables {
			err := q.scan(ctx, table, func(id string, key [][]byte, rec []byte, sum int64) {
				c.Record()
				var v any
				switch table {
				case "sessions":
					c.Session()
					v = &sessionRec{}
				case "revisions":
					v = &revisionRec{}
				case "messages":
					v = &messageRec{}
				case "calls":
					v = &ledgerEntryRec{}
				case "requests":
					v = &requestRec{}
				}
				if err := decode(table, key, rec, sum, v); err != nil {
					note(id, fmt.Sprintf("%s of session %q: %v", describeKey(table, key), id, err))
					return
				}
				if h, ok := v.(*sessionRec); ok && !h.Deleted {
					heads[id] = h
				}
			})
			if err != nil {
				return err
			}
		}
		// Graph damage is reported outside any session (an empty id).
		if err := q.s.verifyGraph(ctx, q.tx, c.Record, func(_, problem string) { note("", problem) }); err != nil {
			return err
		}
		c.Check(slices.Collect(maps.Keys(heads)), func(id string) error { return q.checkHistory(ctx, id, heads[id]) })
		return nil
	})
	if err != nil {
		return core.VerifyReport{}, err
	}
	return c.Report(), nil
}

// verifyTx is read without the statement timeout, which a full scan of a
// large store would exceed; ctx bounds it.
func (s *Store) verifyTx(ctx context.Context, fn func(ctx context.Context, q *query) error) error {
	err := s.readTx(ctx, func(ctx context.Context, q *query) error {
		if _, err := q.tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		return fn(ctx, q)
	})
	if err != nil && !isRefusal(err) {
		return s.unavailable(ctx, err)
	}
	return err
}

// scan passes every row of table to fn with its checksum key.
func (q *query) scan(ctx context.Context, table string, fn func(id string, key [][]byte, rec []byte, sum int64)) error {
	second := map[string]string{"revisions": "revision", "messages": "seq", "calls": "tool_use_id", "requests": "request_id"}[table]
	cols := "session_id, NULL::BIGINT, NULL::BYTEA"
	switch table {
	case "revisions", "messages":
		cols = "session_id, " + second + ", NULL::BYTEA"
	case "calls", "requests":
		cols = "session_id, NULL::BIGINT, " + second
	}
	rows, err := q.tx.Query(ctx, "SELECT "+cols+", record, checksum FROM "+q.s.table(table))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, k2, rec []byte
		var n *int64
		var sum int64
		if err := rows.Scan(&id, &n, &k2, &rec, &sum); err != nil {
			return err
		}
		key := [][]byte{id}
		switch {
		case n != nil:
			key = append(key, u64key(uint64(*n)))
		case table != "sessions":
			key = append(key, k2)
		}
		fn(string(id), key, rec, sum)
	}
	return rows.Err()
}

func describeKey(table string, key [][]byte) string {
	switch {
	case len(key) < 2:
		return table + " row"
	case table == "revisions" || table == "messages":
		return fmt.Sprintf("%s row %d", table, binary.BigEndian.Uint64(key[1]))
	default:
		return fmt.Sprintf("%s row %q", table, key[1])
	}
}

// checkHistory reports a missing latest revision or message.
func (q *query) checkHistory(ctx context.Context, id string, h *sessionRec) error {
	rec, err := q.revision(ctx, id, h, 0)
	if err != nil {
		return fmt.Errorf("revision %d: %v", h.Revision, err)
	}
	for _, sg := range rec.Segments {
		var n uint64
		if err := q.tx.QueryRow(ctx, "SELECT COUNT(*) FROM "+q.s.table("messages")+" WHERE session_id = $1 AND seq >= $2 AND seq < $3",
			[]byte(id), int64(sg.FirstSeq), int64(sg.FirstSeq+sg.Count)).Scan(&n); err != nil {
			return fmt.Errorf("messages of revision %d cannot be read: %v", rec.Revision, err)
		}
		if n != sg.Count {
			return fmt.Errorf("%d of the messages %d to %d of revision %d are missing", sg.Count-n, sg.FirstSeq, sg.FirstSeq+sg.Count-1, rec.Revision)
		}
	}
	return nil
}
