package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/savepoint-dev/savepoint/internal/addr"
	"github.com/savepoint-dev/savepoint/internal/version"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Run serves store over gRPC on cfg.Listen (or the socket systemd passed)
// until ctx is cancelled, then reports NOT_SERVING, stops gracefully within
// cfg.ShutdownTimeout, and returns nil. Under systemd it notifies READY=1
// once serving, feeds the watchdog while store.Ping passes, and notifies
// STOPPING=1 at shutdown (systemd.go). The caller opens the store before
// calling Run, so that the store's directory lock proves no other daemon
// owns a stale socket file, and closes it after Run returns. Importing errdetails here and in status.go
// registers ErrorInfo, so that reflection clients such as grpcurl print
// error details decoded.
func Run(ctx context.Context, cfg Config, store core.Store, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	creds, err := serverCredentials(cfg, logger)
	if err != nil {
		return err
	}
	var m *metrics
	if cfg.MetricsAddr != "" {
		m = newMetrics(store)
		stopMetrics, _, err := serveMetrics(cfg.MetricsAddr, m.reg, logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	lis, err := listen(cfg)
	if err != nil {
		return err
	}
	srv, hs, api := newServer(cfg, creds, store, m, logger)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	logger.Info("serving", "listen", cfg.Listen, "addr", lis.Addr().String(), "data_dir", cfg.DataDir)
	notify(logger, "READY=1\nSTATUS=serving on "+cfg.Listen)
	defer startBackground(cfg, store, hs, logger)() // after READY=1: systemd takes no watchdog ping before it
	recovered := make(chan struct{})
	go func() { defer close(recovered); logRecovered(ctx, store, logger) }()
	defer func() { <-recovered }()

	var failed <-chan struct{} // nil: never
	if f, ok := store.(Failer); ok {
		failed = f.Failed()
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve %s: %w", cfg.Listen, err)
	case <-ctx.Done():
	case <-failed:
		logger.Error("the store failed: no more writes are acknowledged; stopping so that the supervisor restarts savepointd")
	}
	stop(cfg, srv, hs, api, logger)
	<-serveErr
	logger.Info("stopped")
	return nil
}

// logRecovered logs, in one line, what the store held when it opened: its
// sessions, those with a tool use in doubt, and the last commit, so that an
// operator sees what a restart after a crash recovered. It reads every
// session's head, so it runs beside serving, within recoverTimeout.
func logRecovered(ctx context.Context, store core.Store, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil { // a store's bug must not stop the daemon it does not serve
			logger.Error("panic while counting the sessions recovered", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	r, err := core.Recover(ctx, store)
	if err != nil {
		logger.Warn("could not count the sessions recovered", "err", err)
		return
	}
	logger.Info("recovered", "sessions", r.Sessions, "sessions_in_doubt", r.SessionsInDoubt, "last_commit", r.LastCommit)
}

// recoverTimeout bounds logRecovered's count.
const recoverTimeout = time.Minute

// newServer returns the gRPC server with savepointd's services registered
// over store (the graph service when the store has one), their health
// SERVING, and reflection, and the SavepointService it serves.
func newServer(cfg Config, creds credentials.TransportCredentials, store core.Store, m *metrics, logger *slog.Logger) (*grpc.Server, *health.Server, *rpc.Server) {
	unary, stream := interceptors(cfg, m, logger)
	srv := grpc.NewServer(serverOptions(creds, cfg.MaxRequestBytes, unary, stream)...)
	opts := rpc.Options{Limits: cfg.Limits(), Logger: logger, Version: version.String(), Commit: version.Commit(), StartedOnDemand: cfg.StartedOnDemand}
	if !cfg.NoCallStream {
		opts.CallStreamMaxInFlight = rpc.DefaultCallStreamMaxInFlight
	}
	api := rpc.NewServer(store, opts)
	savepointv1.RegisterSavepointServiceServer(srv, api)
	hs := health.NewServer()
	hs.SetServingStatus(savepointv1.SavepointService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	var graph savepointv1.GraphCheckpointServiceServer
	if gs, ok := store.(core.GraphStore); ok {
		graph = rpc.NewGraphServer(gs, opts)
		savepointv1.RegisterGraphCheckpointServiceServer(srv, graph)
		hs.SetServingStatus(savepointv1.GraphCheckpointService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if !cfg.NoCallStream {
		// Each carried call passes the interceptors its own RPC's call does
		// (unary, or stream for GetCheckpoint): the
		// stream's own ones (the stream's metrics, log and access check)
		// wrap the stream as a whole.
		savepointv1.RegisterCallStreamServiceServer(srv, rpc.NewStreamServer(api, graph, rpc.StreamOptions{
			MaxInFlight: opts.CallStreamMaxInFlight, Interceptor: rpc.ChainUnary(unary...),
			StreamInterceptor: rpc.ChainStream(stream...), Logger: logger,
		}))
		hs.SetServingStatus(savepointv1.CallStreamService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	if m != nil {
		m.rpc.InitializeMetrics(srv)
	}
	return srv, hs, api
}

// startBackground starts what runs beside the server: the watch of the
// store's reachability (for a store that can become unreachable), retention,
// and the systemd watchdog. The function it returns stops them all and
// waits for them.
func startBackground(cfg Config, store core.Store, hs *health.Server, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if r, ok := store.(core.Reacher); ok {
		services := []string{"", savepointv1.SavepointService_ServiceDesc.ServiceName}
		if _, ok := store.(core.GraphStore); ok {
			services = append(services, savepointv1.GraphCheckpointService_ServiceDesc.ServiceName)
		}
		wg.Go(func() { watchReachable(ctx, r, hs, services, logger) })
	}
	stopRetention := startRetention(cfg, store, logger)
	wg.Go(func() { watchdog(ctx, store, logger) })
	return func() {
		cancel()
		wg.Wait()
		stopRetention()
	}
}

// stop reports NOT_SERVING, ends the WatchSessions streams, which never end
// by themselves, and stops srv gracefully, cutting the calls and streams
// still open after cfg.ShutdownTimeout.
func stop(cfg Config, srv *grpc.Server, hs *health.Server, api *rpc.Server, logger *slog.Logger) {
	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	notify(logger, "STOPPING=1\nSTATUS=stopping: draining open calls")
	hs.Shutdown()
	api.Shutdown()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		logger.Warn("graceful stop timed out; closing open calls and streams")
		srv.Stop()
		<-stopped
	}
}

// Failer is implemented by a Store that can fail beyond repair: Failed is
// closed then, and Run stops serving so that the process can exit and be
// restarted.
type Failer interface {
	Failed() <-chan struct{}
}

// listen returns the socket systemd passed, if any (see activated), else
// opens cfg.Listen. For a Unix socket it creates the parent directory,
// replaces a stale socket file, and sets cfg.SocketMode.
func listen(cfg Config) (net.Listener, error) {
	if lis, err := activated(cfg); lis != nil || err != nil {
		return lis, err
	}
	network, address, err := addr.Parse(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if network != "unix" {
		lis, err := net.Listen(network, address)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		return lis, nil
	}

	dirMode := os.FileMode(0o700)
	if cfg.SocketMode&0o070 != 0 {
		dirMode = 0o750 // the group must be able to reach the socket
	}
	if err := os.MkdirAll(filepath.Dir(address), dirMode); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	// The store's lock is held, so a socket file here belongs to no daemon
	// of this data directory; it is stale unless something still answers on
	// it (a daemon of another data directory).
	if fi, err := os.Lstat(address); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: %s exists and is not a socket; remove it or choose another path", cfg.Listen, address)
		}
		if c, err := net.DialTimeout("unix", address, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: another server is listening on %s; stop it or choose another path", cfg.Listen, address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	lis, err := net.Listen("unix", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if err := os.Chmod(address, cfg.SocketMode); err != nil {
		lis.Close()
		return nil, fmt.Errorf("set socket mode: %w", err)
	}
	return lis, nil
}

// interceptors are, outermost first: the RPC metrics (when m is not nil),
// the call log, the uid and gid check, the domain metrics, and the panic
// recovery, so that a denied or panicking call is both counted and logged.
// streamWorkers is how many goroutines serve calls, each reused from call
// to call: a call on a new goroutine grows its stack again to the handler's
// depth (runtime.newstack was a tenth of savepointd's CPU at 64 sessions).
// Calls beyond this many at once get a goroutine of their own.
const streamWorkers = 256

// serverOptions are the gRPC server's options: the transport credentials,
// the interceptors, the request codec refusing requests over maxRequestBytes
// (its interceptors innermost), and the workers.
func serverOptions(creds credentials.TransportCredentials, maxRequestBytes int, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.NumStreamWorkers(streamWorkers),
	}
	return append(opts, rpc.CodecOptions(maxRequestBytes)...)
}

func interceptors(cfg Config, m *metrics, logger *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	allow := allowList{uids: cfg.AllowUIDs, gids: cfg.AllowGIDs}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if m != nil {
		unary = append(unary, m.rpc.UnaryServerInterceptor())
		stream = append(stream, m.rpc.StreamServerInterceptor())
	}
	unary = append(unary, logUnary(logger), allow.unary)
	stream = append(stream, logStream(logger), allow.stream)
	if m != nil {
		unary = append(unary, m.unary)
	}
	unary = append(unary, recovery.UnaryServerInterceptor(recovery.WithRecoveryHandlerContext(recoverPanic(logger))))
	stream = append(stream, recovery.StreamServerInterceptor(recovery.WithRecoveryHandlerContext(recoverPanic(logger))))
	return unary, stream
}

// recoverPanic turns a handler's panic into INTERNAL, logging the panic and
// its stack.
func recoverPanic(logger *slog.Logger) recovery.RecoveryHandlerFuncContext {
	return func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return rpc.ToStatus(errors.New("panic")).Err()
	}
}
