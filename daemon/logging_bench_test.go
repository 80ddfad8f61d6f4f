package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/peer"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// BenchmarkLogCall is the call line of a successful save, as logUnary
// writes one for every write: text format, to a file, with the caller's
// credentials from the Unix socket, from a goroutine as deep in calls as a
// gRPC handler's.
func BenchmarkLogCall(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	logger, err := NewLogger(f, "", slog.LevelInfo)
	if err != nil {
		b.Fatal(err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.UnixAddr{Name: "@", Net: "unix"},
		AuthInfo: PeerCred{PID: 4242, UID: 1000, GID: 1000},
	})
	req := &savepointv1.SaveCheckpointRequest{SessionId: "bench-session-1", RequestId: "0b7f3c2e-51a4-4d6c-9a51-7d1e2f3a4b5c"}
	const method = savepointv1.SavepointService_SaveCheckpoint_FullMethodName
	atDepth(40, func() {
		for b.Loop() {
			logCall(ctx, logger, method, time.Now(), nil, "5f1c8a7e-0d3b-4c2a-9e6f-1a2b3c4d5e6f", req)
		}
	})
}

// atDepth calls f under n more frames.
//
//go:noinline
func atDepth(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	atDepth(n-1, f)
}
