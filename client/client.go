package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Client is a connection to savepointd. It is safe for concurrent use.
type Client struct {
	conn      *grpc.ClientConn
	raw       savepointv1.SavepointServiceClient
	cfg       config
	autostart *autostarter // nil: the caller chose the address, or starting on demand is off
}

// RetryPolicy says how often a call that failed with UNAVAILABLE (the daemon
// is down or restarting) is tried again. Only calls that are safe to repeat
// are retried: SaveCheckpoint when it carries a request_id (the retry carries
// the same one, so the daemon applies the save once), BeginEffect (a repeat
// returns the same key), RecordEffect (the same record again is accepted),
// Resume (a repeat only takes ownership again), CompleteSession,
// ForkSession, RewindSession and ResolveEffect with a request_id, and the
// reads. DeleteSession is never retried.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 or less disables retries.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry; it doubles on each
	// retry up to MaxBackoff, with up to 20% random jitter.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// ReconnectWait bounds the wait for the connection: after a failed try
	// and its backoff, a retry waits until the connection is ready again, at
	// most ReconnectWait after the call's first failure and never past its
	// context's deadline, then fails with the last error if it is still
	// down. gRPC's reconnect backoff (up to 2 s) can outlast the retries'
	// backoff, so without it the first call after a restart may fail
	// although the daemon is back. Zero disables the wait.
	ReconnectWait time.Duration
	// Budget keeps retrying a retry-safe call past MaxAttempts, each retry
	// MaxBackoff apart, while its wait ends within Budget of the call's
	// first failure (and before its context's deadline): long enough, the
	// call outlasts a failover of savepointd's database (NO_WRITABLE_HOST,
	// COMMIT_OUTCOME_UNKNOWN) or a restart of the daemon. Zero leaves
	// MaxAttempts alone to bound the retries.
	Budget time.Duration
}

// DefaultRetryPolicy is used unless WithRetry says otherwise: 5 attempts over
// about 1.5 seconds, then retries a second apart until 10 seconds after the
// first failure, waiting up to 5 seconds for the connection. The budget
// covers a PostgreSQL failover as `make failover` measures it (the longest
// time without a writable host it has seen is 8.3 s; docs/reliability-postgres.md).
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, ReconnectWait: 5 * time.Second,
	Budget: 10 * time.Second}

// retryAgain says whether a call that failed on try (0 for the first),
// first at failedAt, is tried again after wait.
func (p RetryPolicy) retryAgain(try int, failedAt time.Time, wait time.Duration) bool {
	if try+1 < max(1, p.MaxAttempts) {
		return true
	}
	return p.Budget > 0 && time.Since(failedAt)+wait <= p.Budget
}

func (p RetryPolicy) backoff(retry int) time.Duration {
	d := p.InitialBackoff
	for range retry {
		d *= 2
		if p.MaxBackoff > 0 && d >= p.MaxBackoff {
			d = p.MaxBackoff
			break
		}
	}
	if d <= 0 {
		return 0
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

type config struct {
	dialOpts      []grpc.DialOption
	retry         RetryPolicy
	waitReady     bool
	logger        *slog.Logger
	resultsFunc   ToolResultsFunc
	onLedgerError func(call ToolUse, result ToolResult, err error)
	toolHook      func(ToolEvent)
	approval      map[string]bool // tools that require approval, by name
	tls           *TLS
	tlsConfig     *tls.Config
}

// Option configures a Client.
type Option func(*config)

// WithDialOptions adds gRPC dial options after the client's own (the
// transport credentials, a dialer for the address, a short reconnect
// backoff), so they can override them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithRetry sets the policy for calls that fail with UNAVAILABLE.
func WithRetry(p RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithWaitReady makes Dial wait until the daemon accepts the connection or
// ctx ends (then Dial fails with ErrUnavailable). By default Dial returns at
// once and the first call reports an unreachable daemon.
func WithWaitReady() Option { return func(c *config) { c.waitReady = true } }

// WithLogger sets the logger for retries and ledger failures (default
// slog.Default()). The client never logs message or tool payloads.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithToolResults sets how sessions turn tool results into the message(s)
// that PointB appends (default AnthropicToolResults).
func WithToolResults(f ToolResultsFunc) Option { return func(c *config) { c.resultsFunc = f } }

// WithLedgerErrorHandler sets a function called, in addition to an
// slog error, whenever a tool ran but its outcome could not be written to the
// ledger. Such a tool's result is still the real one (see Session.RunTool).
func WithLedgerErrorHandler(f func(call ToolUse, result ToolResult, err error)) Option {
	return func(c *config) { c.onLedgerError = f }
}

// WithToolHook sets a function called at each ToolStage of every tool use a
// Session runs or reconciles, synchronously, on the goroutine running the
// tool, with no Session lock held (it may call the Session's getters). It
// observes and cannot change what happens: it is meant for logging, tracing
// and crash tests, which can stop the process at an exact moment of the
// protocol (cmd/savepoint-demo's CRASH_AFTER does). A stage is reported only
// once its step succeeded.
func WithToolHook(f func(ToolEvent)) Option { return func(c *config) { c.toolHook = f } }

// WithApprovalRequired names tools that require a person's approval: a
// call of one is begun (BeginEffect with requires_approval) only against an
// approval for that exact call and input, which the begin spends once.
// Without one, RunTool and Reconcile return a result whose Err wraps
// ErrAwaitingApproval (the tool did not run; approve it, then Reconcile
// after a resume or RunTool again); after a denial the result is the
// approver's note as an is_error result with DecisionDenied, recorded as
// refused so that every later resume reuses it.
func WithApprovalRequired(toolNames ...string) Option {
	return func(c *config) {
		if c.approval == nil {
			c.approval = map[string]bool{}
		}
		for _, n := range toolNames {
			c.approval[n] = true
		}
	}
}

// Dial connects to savepointd at addr: "unix:PATH" or "HOST:PORT"; "" means
// DefaultAddr(). A Unix socket is plaintext; a TCP address uses TLS 1.3 when
// WithTLS, WithTLSConfig or the SAVEPOINT_TLS_* variables (EnvTLSCA) say so,
// and is plaintext otherwise, which the daemon allows on loopback only. Unless
// WithWaitReady is given, Dial does not wait for the daemon and ctx only
// bounds option processing and the start below.
//
// When addr is "" and SAVEPOINT_ADDR is unset, and nothing answers at the
// per-user default address, Dial starts savepointd there on demand (the
// one SAVEPOINTD_PATH names, else savepointd on PATH), detached, and waits
// until it reports SERVING; a call that later finds the daemon gone starts
// it again. SAVEPOINT_AUTOSTART=0 turns this off; an address the caller
// chose never starts anything. docs/install.md describes it.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	cfg := config{retry: DefaultRetryPolicy, resultsFunc: AnthropicToolResults}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	var auto *autostarter
	if addr == "" {
		addr = DefaultAddr()
		if auto = newAutostarter(os.Getenv); auto != nil {
			a, err := auto.ensure(ctx)
			if err != nil {
				return nil, err
			}
			if a != addr { // the system's daemon: nothing to start, now or later
				addr, auto = a, nil
			}
		}
	}
	ep, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	target := "passthrough:///" + ep.address
	if ep.network == "unix" {
		target = "passthrough:///localhost" // the path may hold anything; the dialer has it
	}
	tc, err := cfg.transportTLS(ep, os.Getenv)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	c := &Client{cfg: cfg, autostart: auto}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, ep.network, ep.address)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(dialer),
		// A local daemon restarts in moments: reconnect soon, not after gRPC's
		// default of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(c.intercept),
		grpc.WithChainStreamInterceptor(interceptStream),
	}
	conn, err := grpc.NewClient(target, append(dopts, cfg.dialOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("savepoint: dial %s: %w", addr, err)
	}
	c.conn = conn
	c.raw = savepointv1.NewSavepointServiceClient(conn)
	conn.Connect()
	if cfg.waitReady {
		for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
			if !conn.WaitForStateChange(ctx, s) {
				conn.Close()
				return nil, translate(status.Errorf(codes.Unavailable, "savepointd at %s not ready: %v (last state %s)", addr, ctx.Err(), s))
			}
		}
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Raw returns the generated gRPC client for calls the Session does not cover.
// Its calls go through the same retries and error translation.
func (c *Client) Raw() savepointv1.SavepointServiceClient { return c.raw }

// intercept refuses a request gRPC could not encode (a string that is not
// UTF-8: INVALID_UTF8, as the daemon would answer), retries a retry-safe call
// that failed with UNAVAILABLE and translates the final error. The request
// message is sent unchanged, so a SaveCheckpoint retry carries its original
// request_id.
func (c *Client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := refuseInvalidUTF8(req); err != nil {
		return err
	}
	safe := retrySafe(method, req)
	var readyBy, failedAt time.Time
	for try := 0; ; try++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if c.autostart != nil && status.Code(err) == codes.Unavailable {
			// The daemon started on demand is gone: start it again, so that
			// this call's retry, or the next call, finds one.
			if _, aerr := c.autostart.ensure(ctx); aerr != nil {
				return aerr
			}
		}
		if err == nil || !safe || status.Code(err) != codes.Unavailable {
			return translate(err)
		}
		if failedAt.IsZero() {
			failedAt = time.Now()
			readyBy = failedAt.Add(c.cfg.retry.ReconnectWait)
		}
		wait := c.cfg.retry.backoff(try)
		if !c.cfg.retry.retryAgain(try, failedAt, wait) {
			return translate(err)
		}
		c.cfg.logger.Warn("savepoint: daemon unavailable, retrying", "method", method, "attempt", try+2, "in", wait, "err", status.Convert(err).Message())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return translate(err)
		case <-t.C:
		}
		if !c.cfg.retry.reconnected(ctx, cc, readyBy) {
			return translate(err)
		}
	}
}

// reconnected waits until cc is connected again, at most until readyBy and
// the end of ctx, and says whether to retry; with ReconnectWait zero it says
// yes at once.
func (p RetryPolicy) reconnected(ctx context.Context, cc *grpc.ClientConn, readyBy time.Time) bool {
	if p.ReconnectWait <= 0 {
		return true
	}
	wctx, cancel := context.WithDeadline(ctx, readyBy)
	defer cancel()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Shutdown:
			return false
		case connectivity.Idle:
			cc.Connect()
		}
		if !cc.WaitForStateChange(wctx, s) {
			return false
		}
	}
}

// interceptStream translates the errors of a streaming call (Backup), as
// intercept does a unary call's, INVALID_UTF8 included; a stream is never
// retried.
func interceptStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, translate(err)
	}
	return translatedStream{cs}, nil
}

// translatedStream is a grpc.ClientStream whose errors are translated;
// io.EOF, the end of the stream, passes unchanged. A message SendMsg could
// not encode for a string that is not UTF-8 is INVALID_UTF8; gRPC has then
// ended the stream, as it does on any send it refuses.
type translatedStream struct{ grpc.ClientStream }

func (s translatedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return translate(err)
}

func (s translatedStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if uerr := refuseInvalidUTF8(m); uerr != nil {
		return uerr
	}
	return translate(err)
}
