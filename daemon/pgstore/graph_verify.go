package pgstore

import (
	"context"
	"fmt"

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
// note with the thread of each damaged one and counting each read.
func (s *Store) verifyGraph(ctx context.Context, tx pgx.Tx, count func(), note func(thread, problem string)) error {
	for _, table := range append([]string{"graph_threads"}, graphDataTables...) {
		cols := graphKeyCols[table]
		data := "NULL::bytea"
		if table != "graph_threads" && table != "graph_requests" {
			data = "data"
		}
		sel := "thread_id, record, " + data + ", checksum"
		if cols != "" {
			sel += ", " + cols
		}
		rows, err := tx.Query(ctx, "SELECT "+sel+" FROM "+s.table(table))
		if err != nil {
			return err
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return err
			}
			count()
			thread, _ := vals[0].([]byte)
			rec, _ := vals[1].([]byte)
			d, _ := vals[2].([]byte)
			sum, _ := vals[3].(int64)
			var key []string
			for _, v := range vals[4:] {
				b, _ := v.([]byte)
				key = append(key, string(b))
			}
			var v any
			switch table {
			case "graph_threads":
				v = &threadRec{}
			case "graph_checkpoints":
				v = &graphCheckpointRec{}
			case "graph_blobs":
				v = &graphBlobRec{}
			case "graph_writes":
				v = &graphWriteRec{}
			case "graph_effects":
				v = &graphEffectRec{}
			default:
				v = &graphRequestRec{}
			}
			if err := gdecode(string(thread), table, rec, d, sum, v, key...); err != nil {
				note(string(thread), fmt.Sprintf("graph thread %q: %s row: %v", thread, table, err))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
