package integration_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// smallBudget makes the daemon cut responses at 256 KiB, so that values of
// a few hundred KiB already need value_chunk messages.
var smallBudget = daemon.Config{ResponseBudgetBytes: 256 << 10, MaxMessageBytes: 64 << 10, MaxStateBytes: 64 << 10}

// raceUploadBlobBytes is the size of each uploaded blob of the Defaults case
// under the race detector: over the default request limit (4 MiB) and
// response budget (3 MiB), so that the upload is streamed, staged over
// several commits and read back in value chunks at the default limits, as
// at 16 MiB, at a third of the bytes the race detector watches.
const raceUploadBlobBytes = 5 << 20

// TestGraphService runs the suite against the in-process daemon on disk,
// with the default limits (and a 64 MiB upload, 21 MiB under the race
// detector: `make test-large` runs the 64 MiB one) and with a small
// response budget (and an 8 MiB upload).
func TestGraphService(t *testing.T) {
	t.Parallel()
	defaultBlobBytes := 0 // graphtest's 16 MiB
	if raceEnabled {
		defaultBlobBytes = raceUploadBlobBytes
	}
	for _, tc := range []struct {
		name      string
		cfg       daemon.Config
		blobBytes int
	}{
		{"SmallBudget", smallBudget, 2 << 20},
		{"Defaults", daemon.Config{}, defaultBlobBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
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

// TestGraphServiceInSavepointd checks the wiring of the real binary: the
// health service reports GraphCheckpointService SERVING, and a checkpoint
// put through it survives a kill -9 and a restart.
func TestGraphServiceInSavepointd(t *testing.T) {
	d := daemontest.Start(t)
	ctx := t.Context()
	h, err := healthpb.NewHealthClient(d.Conn).Check(ctx, &healthpb.HealthCheckRequest{Service: savepointv1.GraphCheckpointService_ServiceDesc.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of %s: %v %v", savepointv1.GraphCheckpointService_ServiceDesc.ServiceName, h, err)
	}
	g := savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	if _, err := g.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{
		Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "t", CheckpointId: "1", MetadataJson: `{"k":1}`, ChannelVersions: map[string]string{"a": "1"}},
		Blobs:      []*savepointv1.ChannelBlob{{Channel: "a", Version: "1", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`"A"`)}}},
	}); err != nil {
		t.Fatal(err)
	}
	d.Kill()
	d.Restart()
	tp, err := graphtest.Get(ctx, g, &savepointv1.GetCheckpointRequest{ThreadId: "t"}, 0)
	if err != nil || tp == nil || tp.Checkpoint.MetadataJson != `{"k":1}` || len(tp.Blobs) != 1 || string(tp.Blobs[0].Value.Data) != `"A"` {
		t.Fatalf("after kill -9 and restart: %v %v", tp, err)
	}
}
