package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestByUpdateUsesTheIndex checks that a page of ListSessionsByUpdate over
// 100,000 session rows reads the index on (neg_update_ns, session_id) from
// the cursor, in order, and neither scans the table nor sorts it, in both
// of its forms.
func TestByUpdateUsesTheIndex(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Shared(t)
	url := srv.URL("postgres")
	s, err := Open(ctx, url, Options{Schema: fmt.Sprintf("byupdate_plan_%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, st := range []string{
		"INSERT INTO " + s.table("sessions") + " (session_id, record, checksum, neg_update_ns)" +
			" SELECT convert_to('s' || g, 'UTF8'), '\\x7b7d'::bytea, 0, -g::bigint * 1000 FROM generate_series(1, 100000) g",
		"ANALYZE " + s.table("sessions"),
	} {
		if _, err := c.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		withID bool
		args   []any
	}{
		{true, []any{256, int64(-50_000_000), []byte("s50000")}},
		{false, []any{256, int64(-50_000_000)}},
	} {
		rows, err := c.Query(ctx, "EXPLAIN "+s.byUpdateSQL(tc.withID), tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "Index Scan using sessions_neg_update_ns_session_id_idx") || strings.Contains(text, "Seq Scan") || strings.Contains(text, "Sort") {
			t.Errorf("with id %v, the plan does not read the index in order:\n%s", tc.withID, text)
		}
	}
}
