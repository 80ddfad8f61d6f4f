package daemon

import (
	"context"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestCallsRunOnStreamWorkers checks that the server's options make calls
// run on gRPC's reused stream workers, whose stacks have already grown,
// rather than on a new goroutine per call.
func TestCallsRunOnStreamWorkers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "w.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stacks := make(chan string, 3)
	capture := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		stacks <- string(debug.Stack())
		return handler(ctx, req)
	}
	srv := grpc.NewServer(serverOptions(insecure.NewCredentials(), 1<<20, []grpc.UnaryServerInterceptor{capture}, nil)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 3 {
		if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if st := <-stacks; !strings.Contains(st, "grpc.(*Server).serverWorker") {
			t.Fatalf("a call ran outside gRPC's stream workers:\n%s", st)
		}
	}
}
