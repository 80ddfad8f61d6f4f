package integration_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// startRun runs Run on a socket in a temporary directory until the test
// ends, and returns the socket's path and a connection to it.
func startRun(t *testing.T, store core.Store, cfg daemon.Config) (string, *grpc.ClientConn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "sub", "s.sock")
	cfg.Listen = "unix:" + sock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// The socket file exists from bind(2), a moment before listen(2): wait
	// for the listener, or the first call can meet ECONNREFUSED on a busy machine.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := healthpb.NewHealthClient(conn).Check(wctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("health: %v", err)
	}
	return sock, conn
}

func TestRunServes(t *testing.T) {
	sock, conn := startRun(t, oneSession{}, daemon.Config{})

	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if di, err := os.Stat(filepath.Dir(sock)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode = %v, %v; want 0700", di.Mode().Perm(), err)
	}

	ctx := context.Background()
	for _, svc := range []string{"", "savepoint.v1.SavepointService"} {
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, %v", svc, h, err)
		}
	}

	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "savepoint.v1.SavepointService") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "google.rpc.ErrorInfo"}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetFileDescriptorResponse() == nil {
		t.Errorf("reflection cannot describe google.rpc.ErrorInfo: %v, %v", resp.GetErrorResponse(), err)
	}
	stream.CloseSend()

	client := savepointv1.NewSavepointServiceClient(conn)
	got, err := client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil || len(got.GetCheckpoint().GetMessages()) != 1 {
		t.Errorf("GetSession = %v, %v", got, err)
	}
	_, err = client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s", Revision: proto.Uint64(9)})
	wantReason(t, err, codes.NotFound, "REVISION_NOT_FOUND")

	big := &savepointv1.SaveCheckpointRequest{SessionId: "s", StateJson: `"` + strings.Repeat("x", 5<<20) + `"`}
	_, err = client.SaveCheckpoint(ctx, big)
	wantReason(t, err, codes.ResourceExhausted, "REQUEST_TOO_LARGE")
}

// oneSession is a store holding session "s" at revision 1 with one
// message; the methods its embedded nil Store leaves out panic.
type oneSession struct{ core.Store }

func (oneSession) Checkpoint(_ context.Context, sessionID string, revision uint64) (core.Checkpoint, error) {
	if sessionID != "s" {
		return core.Checkpoint{}, core.ErrSessionNotFound
	}
	if revision != 0 && revision != 1 {
		return core.Checkpoint{}, core.ErrRevisionNotFound
	}
	return core.Checkpoint{SessionID: "s", Revision: 1, MessageCount: 1}, nil
}

func (oneSession) Messages(context.Context, string, uint64, uint64, int, int) ([]core.Message, error) {
	return []core.Message{{Role: "user", ContentJSON: `"hi"`}}, nil
}

// panicStore panics on every call: its embedded Store is nil.
type panicStore struct{ core.Store }

func TestRunRecoversPanics(t *testing.T) {
	_, conn := startRun(t, panicStore{}, daemon.Config{})
	_, err := savepointv1.NewSavepointServiceClient(conn).Resume(context.Background(), &savepointv1.ResumeRequest{SessionId: "s"})
	wantReason(t, err, codes.Internal, "INTERNAL")
	// The daemon still serves.
	_, err = savepointv1.NewSavepointServiceClient(conn).Resume(context.Background(), &savepointv1.ResumeRequest{SessionId: "-"})
	wantReason(t, err, codes.InvalidArgument, "INVALID_SESSION_ID")
}

func TestRunReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	cfg := daemon.Config{Listen: "unix:" + sock}

	// A daemon that died leaves its socket file, with no one listening.
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	lis.SetUnlinkOnClose(false)
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg, oneSession{}, slog.New(slog.DiscardHandler)) }()
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Errorf("health over a replaced stale socket: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run over a stale socket: %v", err)
	}

	if err := os.WriteFile(sock, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = daemon.Run(context.Background(), cfg, oneSession{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Run over a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "mine" {
		t.Error("Run replaced a regular file")
	}
}

func TestRunStopsWithOpenStream(t *testing.T) {
	f := oneSession{}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := daemon.Config{Listen: "unix:" + sock, ShutdownTimeout: 300 * time.Millisecond, SocketMode: 0o660}
	go func() { done <- daemon.Run(ctx, cfg, f, slog.New(slog.DiscardHandler)) }()

	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch = %v, %v", h, err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, %v; want 0660", fi.Mode().Perm(), err)
	}

	start := time.Now()
	cancel()
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("watch after cancel = %v, %v; want NOT_SERVING", h, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run hung on an open Watch stream")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %v", d)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestRunInvalidConfig(t *testing.T) {
	err := daemon.Run(context.Background(), daemon.Config{Listen: "0.0.0.0:1"}, oneSession{}, nil)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Run = %v, want a config error", err)
	}
}

func TestRunRefusesLiveSocket(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	lis, err := net.Listen("unix", sock) // another data directory's daemon
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	err = daemon.Run(context.Background(), daemon.Config{Listen: "unix:" + sock}, oneSession{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "another server is listening") {
		t.Fatalf("Run over a live socket = %v, want a refusal", err)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the live socket was removed: %v", err)
	}
}

// failingStore is a store whose Failed channel the test closes.
type failingStore struct {
	oneSession
	failed chan struct{}
}

func (f *failingStore) Failed() <-chan struct{} { return f.failed }

func TestRunStopsWhenStoreFails(t *testing.T) {
	f := &failingStore{failed: make(chan struct{})}
	sock := filepath.Join(shortDir(t), "s.sock")
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(context.Background(), daemon.Config{Listen: "unix:" + sock}, f, slog.New(slog.DiscardHandler))
	}()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	close(f.failed)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after a store failure: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run kept serving after the store failed")
	}
}

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
