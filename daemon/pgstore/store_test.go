package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/core/storetest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var ctx = context.Background()

var schemaSeq atomic.Int64

// newSchema returns a schema name no other test uses.
func newSchema() string { return fmt.Sprintf("t%d", schemaSeq.Add(1)) }

// open opens a store on url in schema, closed at cleanup.
func open(t testing.TB, url, schema string, opts ...func(*pgstore.Options)) *pgstore.Store {
	t.Helper()
	o := pgstore.Options{Schema: schema, StatementTimeout: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	s, err := pgstore.Open(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range []struct{ name, extra string }{
		{"CacheStatement", ""},
		// PgBouncer's transaction pooling: no prepared statements.
		{"SimpleProtocol", "default_query_exec_mode=simple_protocol"},
		{"Exec", "default_query_exec_mode=exec"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			url := srv.URL("postgres")
			if mode.extra != "" {
				url = srv.URL("postgres", mode.extra)
			}
			storetest.Run(t, func(t *testing.T) core.Store {
				s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: newSchema()})
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}
