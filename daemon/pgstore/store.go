// Package pgstore is the core.Store kept in a PostgreSQL database, so
// that savepointd on several hosts can share sessions: any host can resume
// any session, and fencing, revision checks and request-id replay hold
// across hosts. Open creates and migrates its tables in one schema
// (DefaultSchema); a Store holds a connection pool from Open until Close.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the PostgreSQL schema that holds the store's tables
// unless Options.Schema names another.
const DefaultSchema = "savepoint"

// DefaultStatementTimeout bounds each call to the database unless
// Options.StatementTimeout sets another bound.
const DefaultStatementTimeout = 10 * time.Second

// ErrConfig is returned by Open for a URL that pgx does not accept.
var ErrConfig = errors.New("invalid store URL")

// ErrFormat is returned by Open when the schema was written by a newer
// savepointd, in a SchemaVersion this one cannot serve.
var ErrFormat = errors.New("unsupported schema version")

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables; empty means
	// DefaultSchema. It is created when missing.
	Schema string
	// Logger receives the store's log lines; nil discards them.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// StatementTimeout bounds every call to the database, a whole group
	// commit included; zero means DefaultStatementTimeout.
	StatementTimeout time.Duration
	// Writers bounds the group commits in flight at once, each on its own
	// connection of the pool; zero means the pool's size (the URL's
	// pool_max_conns, pgx's default otherwise) less one, kept for reads.
	// A request queued while every writer is busy joins the next group
	// commit, so the commits in flight follow the load.
	Writers int
	// Tracer is given every query of the pool's connections, and every
	// batch when it is a pgx.BatchTracer too; nil traces nothing.
	Tracer pgx.QueryTracer
}

// Store is a core.Store backed by PostgreSQL. Close it to release its
// connections.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
	// pooled is set when the URL asks for a query exec mode without
	// prepared statements (behind PgBouncer's transaction pooling): the
	// statement timeout is then set in each transaction, since a pooler
	// refuses or drops it as a startup parameter.
	pooled bool
	target string // user@host:port/database, for errors and logs; never the password
	// failover is set for a URL of several hosts or with
	// target_session_attrs: a connection that fails is then a host that
	// is down or not writable, and writes are NO_WRITABLE_HOST meanwhile.
	failover bool
	// standbys, set when the URL asks for a writable host
	// (target_session_attrs=read-write or primary), is a pool on the same
	// hosts that takes any of them: reads fall back to it while no host
	// accepts writes.
	standbys *pgxpool.Pool

	ops       chan *op
	writers   int          // group commits in flight at most (Options.Writers)
	mu        sync.RWMutex // held for reading while queueing on ops
	closed    bool         // set under mu: nothing more is queued
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	commits   atomic.Uint64 // transactions the group commit committed
	fallbacks atomic.Uint64 // fast paths sent back to the per-request path (fast.go)
	uncached  atomic.Uint64 // cached paths sent back to the reads ahead (headcache.go)
	heads     headCache
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.Reacher      = (*Store)(nil)
	_ core.Sizer        = (*Store)(nil)
	_ core.ChangePoller = (*Store)(nil)
)

// Open connects to the database at url (any connection string pgx accepts:
// postgres:// or postgresql:// URLs, key=value pairs, PG* environment
// variables, .pgpass), creates or migrates the schema, and starts the group
// commit. It fails with ErrConfig for a bad URL, or for pgx's default query
// exec mode behind a pooler that refuses it (PgBouncer refusing the
// statement_timeout start-up parameter, or transaction pooling losing
// prepared statements), with core.ErrUnavailable
// when the database cannot be reached within the statement timeout, and
// with ErrFormat when the schema is newer than SchemaVersion. Error texts
// never hold the password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err) // pgx masks the password
	}
	s := &Store{
		schema: opts.Schema, log: opts.Logger, now: opts.Now, timeout: opts.StatementTimeout,
		ops: make(chan *op, 1024), stop: make(chan struct{}),
	}
	if s.schema == "" {
		s.schema = DefaultSchema
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.timeout <= 0 {
		s.timeout = DefaultStatementTimeout
	}
	writers := opts.Writers
	if writers <= 0 {
		writers = max(1, int(cfg.MaxConns)-1)
	}
	cc := cfg.ConnConfig
	if opts.Tracer != nil {
		cc.Tracer = opts.Tracer
	}
	s.target = Describe(cfg)
	switch cc.DefaultQueryExecMode {
	case pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec:
		s.pooled = true
	default:
		if _, set := cc.RuntimeParams["statement_timeout"]; !set {
			cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(s.timeout.Milliseconds(), 10)
		}
	}
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > s.timeout {
		cc.ConnectTimeout = s.timeout
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = s.timeout
	}
	if cfg.MaxConns < int32(writers)+1 {
		cfg.MaxConns = int32(writers) + 1 // reads keep a connection while every writer holds one
	}
	s.failover = cc.ValidateConnect != nil || len(hosts(cc)) > 1
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if cc.ValidateConnect != nil {
		scfg := cfg.Copy()
		scfg.ConnConfig.ValidateConnect = nil
		scfg.MaxConns = min(cfg.MaxConns, 4)
		if s.standbys, err = pgxpool.NewWithConfig(cctx, scfg); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	s.pool, err = pgxpool.NewWithConfig(cctx, cfg)
	if err != nil {
		s.closeStandbys()
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := s.pool.Ping(cctx); err != nil {
		s.pool.Close()
		if cerr := s.refusedStartupParameter(cctx, cc, err); cerr != nil {
			return nil, cerr
		}
		return nil, s.unavailable(ctx, err)
	}
	if !s.pooled {
		if err := s.checkPreparedStatements(cctx); err != nil {
			s.pool.Close()
			s.closeStandbys()
			return nil, err
		}
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		s.closeStandbys()
		return nil, err
	}
	s.useLZ4(ctx)
	if err := s.dropStaleUploads(ctx, s.now().Add(-staleUpload)); err != nil {
		s.pool.Close()
		s.closeStandbys()
		return nil, err
	}
	s.writers = writers
	for range writers {
		s.wg.Add(1)
		go s.loop()
	}
	s.log.Info("PostgreSQL store open", "target", s.target, "schema", s.schema, "schema_version", SchemaVersion, "pooled_mode", s.pooled)
	return s, nil
}

// Describe names the database of cfg as user@host:port/database, with
// every host of a multi-host URL (user@a:5432,b:5432/database), without the
// password.
func Describe(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	return fmt.Sprintf("%s@%s/%s", cc.User, strings.Join(hosts(cc), ","), cc.Database)
}

// hosts returns the distinct host:port pairs of cc, in order: one for a
// URL of one host, whose fallbacks differ only in TLS.
func hosts(cc *pgx.ConnConfig) []string {
	hs := []string{fmt.Sprintf("%s:%d", cc.Host, cc.Port)}
	for _, f := range cc.Fallbacks {
		if h := fmt.Sprintf("%s:%d", f.Host, f.Port); !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	return hs
}

func (s *Store) closeStandbys() {
	if s.standbys != nil {
		s.standbys.Close()
	}
}

// Close stops the group commit, answering what is still queued with
// core.ErrUnavailable, and closes the pool.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
		s.drain()
		s.pool.Close()
		s.closeStandbys()
	})
	return nil
}

// Info returns the store's kind, "postgres", SchemaVersion, the database
// and schema, and the transactions the group commit committed since Open.
func (s *Store) Info() core.StoreInfo {
	return core.StoreInfo{Kind: "postgres", Format: SchemaVersion, Location: s.target + " schema " + s.schema, Commits: s.commits.Load()}
}

// Size returns the bytes of the schema's tables, with their indexes and
// TOAST, as PostgreSQL counts them.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		return q.tx.QueryRow(ctx, "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c"+
			" JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r'", s.schema).Scan(&n)
	})
	return n, err
}

// Ping passes a request through the group commit, which answers it after
// the batch it joins, without a round trip to the database: it fails when
// the group commit is closed or does not answer before ctx is done. The
// database being unreachable does not fail it, as a full disk does not fail
// the embedded store's: every call then fails with core.ErrUnavailable
// within the statement timeout, and the pool reconnects by itself once the
// database is back, so restarting savepointd would not help.
func (s *Store) Ping(ctx context.Context) error {
	o := &op{done: make(chan error, 1)}
	if err := s.enqueue(ctx, o); err != nil {
		return err
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the group commit did not answer: %v", core.ErrUnavailable, ctx.Err())
	}
}

// Reachable returns nil when a round trip to the database succeeds within
// ctx and the statement timeout, and core.ErrUnavailable saying why
// otherwise; savepointd's health service reports NOT_SERVING meanwhile.
func (s *Store) Reachable(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.pool.Ping(pctx); err != nil {
		return s.unavailable(ctx, err)
	}
	return nil
}

// table is the schema-qualified, quoted name of one of the store's tables.
func (s *Store) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }
