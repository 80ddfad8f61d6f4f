package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestMain stops the shared PostgreSQL server (pgtest.Shared) the
// PostgreSQL tests start.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var schemaSeq atomic.Int64

// newSchema returns a schema name no other test uses.
func newSchema() string { return fmt.Sprintf("t%d", schemaSeq.Add(1)) }

// TestPostgresGraphService runs the graph conformance suite against an in-process
// daemon on a PostgreSQL store, each test in its own schema, with a small
// response budget, with prepared statements and with the simple protocol. The upload is sized down to four 4 MiB blobs (a 17 MiB
// checkpoint) to keep go test quick on a shared machine; Restart closes the
// store and opens the same schema again.
func TestPostgresGraphService(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	cfg := daemon.Config{ResponseBudgetBytes: 256 << 10, MaxMessageBytes: 64 << 10, MaxStateBytes: 64 << 10}
	for _, mode := range []struct{ name, url string }{
		{"CacheStatement", srv.URL("postgres")},
		// PgBouncer's transaction pooling: no prepared statements.
		{"SimpleProtocol", srv.URL("postgres", "default_query_exec_mode=simple_protocol")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			graphtest.Run(t, func(t *testing.T) *graphtest.Env {
				e := servePG(t, mode.url, newSchema(), cfg)
				e.UploadBlobBytes = 4 << 20
				return e
			})
		})
	}
}

// TestPgBouncerGraphService runs the graph conformance suite on a store
// opened through PgBouncer's transaction pooling with the simple protocol,
// sized down as TestPostgresGraphService is.
func TestPgBouncerGraphService(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{PoolSize: 8})
	cfg := daemon.Config{ResponseBudgetBytes: 256 << 10, MaxMessageBytes: 64 << 10, MaxStateBytes: 64 << 10}
	url := b.URL("postgres", "default_query_exec_mode=simple_protocol")
	graphtest.Run(t, func(t *testing.T) *graphtest.Env {
		e := servePG(t, url, newSchema(), cfg)
		e.UploadBlobBytes = 4 << 20
		return e
	})
}

func servePG(t *testing.T, url, schema string, cfg daemon.Config) *graphtest.Env {
	t.Helper()
	store, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.DataDir = t.TempDir()
	c.Listen = "unix:" + daemontest.SocketPath(t)
	rctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := daemon.Run(rctx, c, store, slog.New(slog.DiscardHandler)); err != nil {
			t.Error(err)
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-exited
		store.Close()
	}
	if err := daemontest.WaitServing(c.Listen[len("unix:"):], 20*time.Second, exited); err != nil {
		stop()
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		stop()
	})
	budget := cfg.ResponseBudgetBytes
	if budget == 0 {
		budget = daemon.DefaultConfig().ResponseBudgetBytes
	}
	return &graphtest.Env{
		Graph:    savepointv1.NewGraphCheckpointServiceClient(conn),
		Sessions: savepointv1.NewSavepointServiceClient(conn),
		Budget:   budget,
		Restart: func(t *testing.T) *graphtest.Env {
			conn.Close()
			stop()
			return servePG(t, url, schema, cfg)
		},
	}
}
