package graphtest_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// smallBudget makes the daemon cut responses at 256 KiB, so that values of
// a few hundred KiB already need value_chunk messages.
var smallBudget = daemon.Config{ResponseBudgetBytes: 256 << 10, MaxMessageBytes: 64 << 10, MaxStateBytes: 64 << 10}

// TestGraphService runs the suite against the in-process daemon on disk,
// with the default limits (and a 64 MiB upload) and with a small response
// budget (and an 8 MiB upload).
func TestGraphService(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       daemon.Config
		blobBytes int
	}{
		{"SmallBudget", smallBudget, 2 << 20},
		{"Defaults", daemon.Config{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			graphtest.Run(t, func(t *testing.T) *graphtest.Env {
				e := start(t, tc.cfg)
				e.UploadBlobBytes = tc.blobBytes
				return e
			})
		})
	}
}

// start serves a new data directory in this process; Restart stops the
// daemon (closing the store) and serves the same directory again.
func start(t *testing.T, cfg daemon.Config) *graphtest.Env {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Listen = "unix:" + daemontest.SocketPath(t)
	_, stop, err := daemontest.Serve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		conn.Close()
		if !stopped {
			stop()
		}
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
			stopped = true
			conn.Close()
			stop()
			return start(t, daemon.Config{DataDir: cfg.DataDir, ResponseBudgetBytes: cfg.ResponseBudgetBytes,
				MaxMessageBytes: cfg.MaxMessageBytes, MaxStateBytes: cfg.MaxStateBytes})
		},
	}
}
