package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/savepoint-dev/savepoint/daemon/core"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// BenchmarkSaveLayer measures savepointd's own share of a save: what
// bench-quick's cpu_save_vs_floor counts above its floor (an empty RPC plus
// the store alone). The server is built as Run builds it (newServer: its
// credentials, interceptors, request codec and stream workers, no metrics,
// as bench-quick runs it) on a Unix socket, over a store that answers every
// save at once, with the call log written to a file. "empty" is a health
// Check, "save" a SaveCheckpoint as bench-quick sends it (a request id and
// one 2 KiB message); save minus empty is the layer. allocs/op and B/op
// count the client's side too, which no change to savepointd moves.
func BenchmarkSaveLayer(b *testing.B) {
	dir := b.TempDir()
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	logger, err := NewLogger(logf, "", slog.LevelInfo)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listen = "unix:" + filepath.Join(dir, "s.sock")
	creds, err := serverCredentials(cfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	srv, _, _ := newServer(cfg, creds, answeringStore{}, nil, logger)
	lis, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()

	b.Run("empty", func(b *testing.B) {
		hc := healthpb.NewHealthClient(conn)
		cpu := cpuTime()
		for b.Loop() {
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
	})
	b.Run("save", func(b *testing.B) {
		c := savepointv1.NewSavepointServiceClient(conn)
		msgs := []*savepointv1.Message{{Role: "assistant", ContentJson: `{"type":"text","text":"` + strings.Repeat("m", 2048-27) + `"}`}}
		var rev uint64
		cpu := cpuTime()
		for b.Loop() {
			resp, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
				SessionId: "bench-layer", ExpectedRevision: rev, RequestId: uuid.NewString(),
				Task: "bench", Turn: 1, AppendMessages: msgs,
			})
			if err != nil {
				b.Fatal(err)
			}
			rev = resp.GetRevision()
		}
		b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
	})
}

// answeringStore answers each save with the next revision at once, storing
// nothing; its other methods are not called.
type answeringStore struct{ core.Store }

func (answeringStore) SaveCheckpoint(_ context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	if req.SessionID == "" {
		return core.SaveResult{}, fmt.Errorf("%w: no session id", core.ErrInvalidArgument)
	}
	return core.SaveResult{Revision: req.ExpectedRevision + 1, MessageCount: req.ExpectedRevision + 1, Epoch: 1}, nil
}
