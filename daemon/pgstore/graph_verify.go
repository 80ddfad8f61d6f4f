package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
)

// graphKeyCols are the columns of each graph table's checksum key, after
// the thread id, as gsum takes them.
var graphKeyCols = map[string]string{
	"graph_threads":     "",
	"graph_checkpoints": "ns, checkpoint_id",
	"graph_blobs":       "ns, channel, version",
	"graph_writes":      "ns, checkpoint_id, task_id, idx::text::bytea",
	"graph_requests":    "request_id",
	"graph_effects":     "ns, tool_use_id",
}

// verifyGraph checks the checksum and record of every graph row, calling
// note with the thread of each damaged one and counting each read. A value
// over graphInlineBytes is checked in pieces, after its table's rows were
// read, so that no large value is held whole.
func (s *Store) verifyGraph(ctx context.Context, tx pgx.Tx, count func(), note func(thread, problem string)) error {
	vr := &valueReader{ctx: ctx, tx: tx, s: s}
	for _, table := range append([]string{"graph_threads"}, graphDataTables...) {
		cols := graphKeyCols[table]
		data := "NULL::bytea, 0"
		if table != "graph_threads" && table != "graph_requests" {
			data = valueSQL("data", graphInlineBytes)
		}
		sel := "thread_id, record, checksum, " + data
		if cols != "" {
			sel += ", " + cols
		}
		rows, err := tx.Query(ctx, "SELECT "+sel+" FROM "+s.table(table))
		if err != nil {
			return err
		}
		type largeRow struct {
			thread string
			k      rowKey
			rec    []byte
			sum    int64
			size   int64
		}
		var large []largeRow
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return err
			}
			count()
			thread, _ := vals[0].([]byte)
			rec, _ := vals[1].([]byte)
			sum, _ := vals[2].(int64)
			d, _ := vals[3].([]byte)
			size, _ := vals[4].(int32)
			var key [][]byte
			for _, v := range vals[5:] {
				b, _ := v.([]byte)
				key = append(key, b)
			}
			k := graphRowKey(table, cols, thread, key)
			if d == nil && size > 0 {
				large = append(large, largeRow{string(thread), k, rec, sum, int64(size)})
				continue
			}
			if err := decode(table, append(key, d), rec, sum, graphRecord(table)); err != nil {
				note(string(thread), fmt.Sprintf("graph thread %q: %s row: %v", thread, table, err))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range large {
			if err := decodeJSON(r.rec, graphRecord(table)); err != nil {
				note(r.thread, fmt.Sprintf("graph thread %q: %s row: %v", r.thread, table, err))
				continue
			}
			err := vr.pieces(r.thread, r.k, r.rec, r.sum, r.size, func([]byte) error { return nil })
			if errors.Is(err, core.ErrCheckpointCorrupt) {
				note(r.thread, err.Error())
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// graphRecord returns a new record of table's rows to decode into.
func graphRecord(table string) any {
	switch table {
	case "graph_threads":
		return &threadRec{}
	case "graph_checkpoints":
		return &graphCheckpointRec{}
	case "graph_blobs":
		return &graphBlobRec{}
	case "graph_writes":
		return &graphWriteRec{}
	case "graph_effects":
		return &graphEffectRec{}
	default:
		return &graphRequestRec{}
	}
}
