package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/rpc"
	"github.com/savepoint-dev/savepoint/internal/addr"
)

// grpcDefaultMaxRecv is gRPC's default receive limit; no response may need a
// client to raise it.
const grpcDefaultMaxRecv = 4 << 20

// responseMargin is the room left under grpcDefaultMaxRecv for what a
// response holds beyond its budgeted content.
const responseMargin = 64 << 10

// Config is savepointd's configuration. A zero field means its default, as
// DefaultConfig sets it.
type Config struct {
	// DataDir is the data directory: the embedded store's, or, with a
	// PostgreSQL store, only the per-host lock's; empty means "./data".
	DataDir string
	// Listen is "unix:PATH" or a loopback "HOST:PORT"; empty means the default address every client resolves too ($SAVEPOINT_ADDR, else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock, else unix:$XDG_STATE_HOME/savepoint/savepoint.sock, else unix:/run/savepoint/savepoint.sock).
	Listen string
	// StartedOnDemand says that a client started the daemon on demand (see
	// docs/install.md); GetServerInfo reports it.
	StartedOnDemand bool
	// NoCallStream serves no CallStreamService, so that clients send unary
	// calls only, as to a daemon that predates it.
	NoCallStream bool
	// SocketMode is the Unix socket's permission bits, 0600 or 0660 (to let a
	// group connect); zero means 0600.
	SocketMode os.FileMode
	// MaxRequestBytes is the largest request accepted; zero means 4 MiB.
	MaxRequestBytes int
	// MaxMessageBytes caps a message's content_json and an effect's output;
	// zero means 2 MiB.
	MaxMessageBytes int
	// MaxStateBytes caps a checkpoint's state_json; zero means 1 MiB.
	MaxStateBytes int
	// ResponseBudgetBytes is how many bytes of checkpoint and messages one
	// response carries before the rest is paged; zero means 3 MiB.
	ResponseBudgetBytes int
	// ShutdownTimeout bounds the graceful stop after which open calls and
	// streams are cut; zero means 10s.
	ShutdownTimeout time.Duration
	// LogLevel is the least level logged; zero means slog.LevelInfo.
	LogLevel slog.Level
	// AllowUIDs and AllowGIDs restrict the Unix socket's callers to these
	// uids and gids (primary or supplementary), read from the socket's peer
	// credentials; both empty admit every process that can open the socket.
	AllowUIDs, AllowGIDs []uint32
	// TLSCertFile and TLSKeyFile are the server's PEM certificate and key,
	// and TLSClientCAFile the PEM CAs that client certificates must chain to
	// (TLS 1.3, mutual). All empty means plaintext, allowed only on a Unix
	// socket or loopback TCP; a TCP listener beyond loopback needs all three.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// MetricsAddr is the HOST:PORT serving Prometheus /metrics and
	// /debug/pprof/; empty serves neither. It must be a loopback address
	// unless MetricsAllowRemote.
	MetricsAddr string
	// MetricsAllowRemote lets MetricsAddr be a non-loopback address.
	MetricsAllowRemote bool
	// LogFormat is "text" or "json"; empty means "text".
	LogFormat string
	// RetainCompleted deletes a completed or failed session this long after
	// its completion; zero keeps it.
	RetainCompleted time.Duration
	// RetainIdle deletes a session not updated (saved or completed) for this
	// long, whatever its status, and a graph thread not written for this
	// long, as DeleteThread does; zero keeps both.
	RetainIdle time.Duration
	// RetainRevisions keeps only each session's last RetainRevisions
	// revisions and the messages they reach; zero keeps every revision.
	RetainRevisions int
	// GCInterval is the time between passes of retention and value-log GC;
	// zero means every 10 minutes.
	GCInterval time.Duration
	// MemoryLimit is the Go runtime's soft memory limit in bytes, which
	// savepointd sets unless the GOMEMLIMIT environment variable does; zero
	// means DefaultMemoryLimit.
	MemoryLimit int64
}

// DefaultMemoryLimit is savepointd's soft memory limit unless configured:
// what the Badger store holds under load (two memtable arenas, its caches
// and its pooled table-builder buffers: 43-47 MB live at 64 sessions) with
// room for the requests in flight, so that the collector does not run every
// few tens of milliseconds (docs/profiles.md, "Memory and the collector").
const DefaultMemoryLimit = 80 << 20

// PostgresGCPercent is the collector's target percentage (GOGC) savepointd
// sets when it serves the PostgreSQL store, unless the GOGC environment
// variable is set. That daemon's live heap is 3-4 MB, so with Go's 100 it
// collected after every 1-2 MB of allocation; the memory limit still bounds
// the heap. With the embedded store Badger's buffers keep 17-60 MB live,
// and Go's 100 is left (docs/profiles.md, "Memory and the collector").
const PostgresGCPercent = 400

// minMemoryLimit is the least soft limit accepted: below it the garbage
// collector would run without pause under load.
const minMemoryLimit = 48 << 20

// DefaultConfig returns the configuration savepointd runs with when nothing
// is set.
func DefaultConfig() Config {
	lim := rpc.DefaultLimits()
	return Config{
		DataDir:             "./data",
		Listen:              addr.Default(os.Getenv),
		SocketMode:          0o600,
		MaxRequestBytes:     lim.MaxRequestBytes,
		MaxMessageBytes:     lim.MaxMessageBytes,
		MaxStateBytes:       lim.MaxStateBytes,
		ResponseBudgetBytes: lim.ResponseBudgetBytes,
		ShutdownTimeout:     10 * time.Second,
		LogLevel:            slog.LevelInfo,
		MemoryLimit:         DefaultMemoryLimit,
	}
}

// withDefaults returns c with each zero field set to its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DataDir == "" {
		c.DataDir = d.DataDir
	}
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.SocketMode == 0 {
		c.SocketMode = d.SocketMode
	}
	lim := c.Limits()
	c.MaxRequestBytes, c.MaxMessageBytes, c.MaxStateBytes, c.ResponseBudgetBytes =
		lim.MaxRequestBytes, lim.MaxMessageBytes, lim.MaxStateBytes, lim.ResponseBudgetBytes
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = d.MemoryLimit
	}
	return c
}

// Validate reports every setting of c, zero fields taken as their defaults,
// that savepointd cannot run with.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if network, _, err := addr.Parse(c.Listen); err != nil {
		add("listen: %v", err)
	} else {
		errs = append(errs, c.validateAccess(network)...)
	}
	errs = append(errs, c.validateObservability()...)
	if c.SocketMode != 0o600 && c.SocketMode != 0o660 {
		add("socket mode: %#o is not allowed; use 0600, or 0660 to let the socket's group connect", uint32(c.SocketMode))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"max request bytes", c.MaxRequestBytes},
		{"max message bytes", c.MaxMessageBytes},
		{"max state bytes", c.MaxStateBytes},
		{"response budget bytes", c.ResponseBudgetBytes},
	} {
		if f.v < 0 {
			add("%s: %d is negative", f.name, f.v)
		}
	}
	if c.ShutdownTimeout < 0 {
		add("shutdown timeout: %v is negative", c.ShutdownTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"retain completed", c.RetainCompleted}, {"retain idle", c.RetainIdle}, {"gc interval", c.GCInterval}} {
		if d.v < 0 {
			add("%s: %v is negative; 0 turns it off", d.name, d.v)
		}
	}
	if c.RetainRevisions < 0 {
		add("retain revisions: %d is negative; 0 keeps every revision", c.RetainRevisions)
	}
	if c.MemoryLimit < minMemoryLimit {
		add("memory limit: %d bytes is below the %d bytes savepointd needs to run without collecting garbage all the time", c.MemoryLimit, minMemoryLimit)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	if c.ResponseBudgetBytes+responseMargin > grpcDefaultMaxRecv {
		add("response budget bytes: %d plus a %d-byte margin exceeds gRPC's default %d-byte receive limit, which clients would have to raise",
			c.ResponseBudgetBytes, responseMargin, grpcDefaultMaxRecv)
	}
	if c.MaxMessageBytes+c.MaxStateBytes+responseMargin > grpcDefaultMaxRecv {
		add("max message bytes (%d) plus max state bytes (%d) plus a %d-byte margin exceed gRPC's default %d-byte receive limit; lower them",
			c.MaxMessageBytes, c.MaxStateBytes, responseMargin, grpcDefaultMaxRecv)
	}
	if c.MaxMessageBytes+c.MaxStateBytes+responseMargin > c.MaxRequestBytes {
		add("max request bytes: %d cannot hold a save of one %d-byte message and %d bytes of state; raise it or lower those",
			c.MaxRequestBytes, c.MaxMessageBytes, c.MaxStateBytes)
	}
	if c.MaxStateBytes+2*responseMargin > c.ResponseBudgetBytes {
		add("response budget bytes: %d cannot hold a checkpoint with %d bytes of state, its task and labels; raise it or lower max state bytes",
			c.ResponseBudgetBytes, c.MaxStateBytes)
	}
	return errors.Join(errs...)
}

// Limits returns the sizes of c that the services enforce, zero fields
// taken as their defaults.
func (c Config) Limits() rpc.Limits {
	return rpc.Limits{
		MaxRequestBytes:     c.MaxRequestBytes,
		MaxMessageBytes:     c.MaxMessageBytes,
		MaxStateBytes:       c.MaxStateBytes,
		ResponseBudgetBytes: c.ResponseBudgetBytes,
	}.WithDefaults()
}
