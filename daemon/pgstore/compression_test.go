package pgstore_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestValuesCompressLZ4: Open sets the record and data columns of every
// table to lz4, so that a large value is stored lz4-compressed; a table
// another transaction holds does not stop Open, and is set at a later Open.
func TestValuesCompressLZ4(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	c, err := pgx.Connect(ctx, srv.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// compressions returns each value column's compression ("l": lz4).
	compressions := func() map[string]string {
		t.Helper()
		rows, err := c.Query(ctx, `SELECT c.relname || '.' || a.attname, a.attcompression::text FROM pg_attribute a
			JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'lz' AND c.relkind = 'r' AND a.attnum > 0 AND a.atttypid = 'bytea'::regtype AND a.attname IN ('record', 'data')`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var kv [2]string
			return kv, r.Scan(&kv[0], &kv[1])
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range got {
			m[kv[0]] = kv[1]
		}
		return m
	}
	allLZ4 := func(when string) {
		t.Helper()
		cols := compressions()
		if len(cols) < 5 || cols["messages.record"] == "" || cols["calls.record"] == "" {
			t.Fatalf("%s: value columns %v, want the record columns of the five tables at least", when, cols)
		}
		for col, comp := range cols {
			if comp != "l" {
				t.Fatalf("%s: %s compresses with %q, want lz4 (l); all: %v", when, col, comp, cols)
			}
		}
	}

	s := open(t, srv.URL(db), "lz")
	allLZ4("after the first Open")
	content := `"` + strings.Repeat("ab", 4000) + `"`
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "big", AppendMessages: []core.Message{{Role: "user", ContentJSON: content}}}); err != nil {
		t.Fatal(err)
	}
	var how string
	if err := c.QueryRow(ctx, "SELECT pg_column_compression(record) FROM lz.messages").Scan(&how); err != nil || how != "lz4" {
		t.Fatalf("an 8 KB message is stored with compression %q (%v), want lz4", how, err)
	}

	// Set back to pglz and held by a transaction: Open goes on, and leaves
	// the table as it is.
	if _, err := c.Exec(ctx, "ALTER TABLE lz.messages ALTER COLUMN record SET COMPRESSION pglz"); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, srv.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE lz.messages IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, srv.URL(db), "lz")
	if got := compressions()["messages.record"]; got != "p" {
		t.Fatalf("a table held by another transaction: messages.record compresses with %q, want pglz (p) left as it was", got)
	}
	if msgs, err := s2.Messages(ctx, "big", 1, 0, 1<<20, 10); err != nil || len(msgs) != 1 || msgs[0].ContentJSON != content {
		t.Fatalf("the store opened beside the held table reads %d messages, %v", len(msgs), err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	open(t, srv.URL(db), "lz")
	allLZ4("after an Open with the table free")
}
