package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncerBin is where Debian's pgbouncer package puts the binary.
const PgBouncerBin = "/usr/sbin/pgbouncer"

// BouncerOptions configures a Bouncer. The zero value is transaction
// pooling with PgBouncer's own timeouts.
type BouncerOptions struct {
	// PoolMode is PgBouncer's pool_mode; empty means "transaction".
	PoolMode string
	// PoolSize is default_pool_size, the server connections per database
	// and user; zero means 4.
	PoolSize int
	// ServerIdleTimeout, ServerLifetime and ClientIdleTimeout are PgBouncer's
	// server_idle_timeout, server_lifetime and client_idle_timeout; zero
	// means PgBouncer's defaults (600 s, 3600 s, none).
	ServerIdleTimeout, ServerLifetime, ClientIdleTimeout time.Duration
	// IgnoreStartupParameters is ignore_startup_parameters: start-up
	// parameters PgBouncer accepts and drops instead of refusing the
	// connection; nil means none.
	IgnoreStartupParameters []string
}

// Bouncer is one PgBouncer process in front of a Server, listening on a
// Unix socket in its own temporary directory and on a free loopback port,
// with auth_type trust (as the Server) for the user postgres, and the
// wildcard database, so that every database of the Server is reachable
// through it. Stop, Kill and Start may be called in turn; the Bouncer keeps
// its directory and port across them.
type Bouncer struct {
	Dir    string // holds the configuration, the socket and the log
	Port   int
	Server *Server
	Opts   BouncerOptions
	cred   *syscall.Credential // nil: run as this process's user

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// bouncerBin returns PgBouncerBin, or an error saying how to install it:
// `make pgbouncer-tools` (which make test runs first) installs Debian's
// package without enabling or starting its service, which a plain apt-get
// install would leave enabled.
func bouncerBin() (string, error) {
	if !isFile(PgBouncerBin) {
		return "", fmt.Errorf("PgBouncer is not installed (no %s): run make pgbouncer-tools, which installs it without enabling its service", PgBouncerBin)
	}
	return PgBouncerBin, nil
}

// NewBouncer starts a PgBouncer of its own in front of srv for t, and stops
// it and removes its directory at cleanup. It fails the test, never skips
// it, when PgBouncer is missing and cannot be installed.
func NewBouncer(t testing.TB, srv *Server, opts BouncerOptions) *Bouncer {
	t.Helper()
	b, err := StartBouncer(srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Remove)
	return b
}

// StartBouncer starts a PgBouncer in front of srv; the caller calls Remove.
func StartBouncer(srv *Server, opts BouncerOptions) (*Bouncer, error) {
	if _, err := bouncerBin(); err != nil {
		return nil, err
	}
	if opts.PoolMode == "" {
		opts.PoolMode = "transaction"
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 4
	}
	dir, err := os.MkdirTemp("", "pgb")
	if err != nil {
		return nil, err
	}
	b := &Bouncer{Dir: dir, Server: srv, Opts: opts, cred: srv.cred}
	if b.cred != nil {
		if err := os.Chown(dir, int(b.cred.Uid), int(b.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if b.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := b.writeConfig(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := b.Start(); err != nil {
		b.Remove()
		return nil, err
	}
	return b, nil
}

// seconds writes d as PgBouncer's time settings take it, in seconds (a
// fraction allowed).
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

func (b *Bouncer) writeConfig() error {
	// trust still needs the user in auth_file.
	if err := os.WriteFile(filepath.Join(b.Dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return err
	}
	lines := []string{
		"[databases]",
		fmt.Sprintf("* = host=%s port=%d", b.Server.Dir, b.Server.Port),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		fmt.Sprintf("listen_port = %d", b.Port),
		"unix_socket_dir = " + b.Dir,
		"auth_type = trust",
		"auth_file = " + filepath.Join(b.Dir, "userlist.txt"),
		"admin_users = postgres",
		"pool_mode = " + b.Opts.PoolMode,
		fmt.Sprintf("default_pool_size = %d", b.Opts.PoolSize),
		"max_client_conn = 500",
		// No logfile: in the foreground PgBouncer logs to stderr, into
		// pgbouncer.log.
	}
	if b.Opts.ServerIdleTimeout > 0 {
		lines = append(lines, "server_idle_timeout = "+seconds(b.Opts.ServerIdleTimeout))
	}
	if b.Opts.ServerLifetime > 0 {
		lines = append(lines, "server_lifetime = "+seconds(b.Opts.ServerLifetime))
	}
	if b.Opts.ClientIdleTimeout > 0 {
		lines = append(lines, "client_idle_timeout = "+seconds(b.Opts.ClientIdleTimeout))
	}
	if len(b.Opts.IgnoreStartupParameters) > 0 {
		lines = append(lines, "ignore_startup_parameters = "+strings.Join(b.Opts.IgnoreStartupParameters, ","))
	}
	return os.WriteFile(b.configPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func (b *Bouncer) configPath() string { return filepath.Join(b.Dir, "pgbouncer.ini") }

// Start starts pgbouncer on the Bouncer's configuration and waits until a
// query through it reaches the Server.
func (b *Bouncer) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return fmt.Errorf("pgbouncer is running already")
	}
	out, err := os.OpenFile(filepath.Join(b.Dir, "pgbouncer.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// A killed pgbouncer leaves its Unix socket behind; the next one
	// would refuse to start on it.
	os.Remove(filepath.Join(b.Dir, fmt.Sprintf(".s.PGSQL.%d", b.Port)))
	cmd := exec.Command(PgBouncerBin, b.configPath())
	cmd.Dir = b.Dir
	if b.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	b.cmd, b.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, b.URL("postgres", "default_query_exec_mode=simple_protocol"))
		if err == nil {
			_, err = c.Exec(ctx, "SELECT 1")
			c.Close(context.Background())
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			b.cmd = nil
			return fmt.Errorf("pgbouncer exited at start: %s", b.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer does not pass a query through after 30s: %v\n%s", err, b.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops pgbouncer with an immediate shutdown (SIGTERM: client and
// server connections are closed at once) and waits for it to exit.
func (b *Bouncer) Stop() { b.signal(syscall.SIGTERM) }

// Kill kills pgbouncer with SIGKILL, as a crash, and waits for it to exit.
func (b *Bouncer) Kill() { b.signal(syscall.SIGKILL) }

func (b *Bouncer) signal(sig syscall.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(sig)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
	}
	b.cmd = nil
}

// Remove stops pgbouncer and deletes its directory.
func (b *Bouncer) Remove() {
	b.Stop()
	os.RemoveAll(b.Dir)
}

// Log returns pgbouncer's log (its stderr and stdout) of every start.
func (b *Bouncer) Log() string {
	l, _ := os.ReadFile(filepath.Join(b.Dir, "pgbouncer.log"))
	return string(l)
}

// URL is the postgres:// URL of database db through pgbouncer's Unix
// socket, as user postgres; extra is appended to its query ("k=v&k2=v2").
func (b *Bouncer) URL(db string, extra ...string) string {
	u := fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d", db, b.Dir, b.Port)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// TCPURL is URL over loopback TCP.
func (b *Bouncer) TCPURL(db string, extra ...string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.Port, db)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// Version returns pgbouncer's version line, such as "PgBouncer 1.18.0".
func (b *Bouncer) Version() string {
	out, _ := exec.Command(PgBouncerBin, "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

// Connections returns how many of pgbouncer's client connections (list
// "CLIENTS") or server connections (list "SERVERS") are for database db, as
// its admin console's SHOW lists them.
func (b *Bouncer) Connections(t testing.TB, list, db string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, b.URL("pgbouncer", "default_query_exec_mode=simple_protocol"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, "SHOW "+list)
	if err != nil {
		t.Fatalf("SHOW %s: %v", list, err)
	}
	defer rows.Close()
	col := -1
	for i, f := range rows.FieldDescriptions() {
		if f.Name == "database" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("SHOW %s has no database column", list)
	}
	n := 0
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(v[col]) == db {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("SHOW %s: %v", list, err)
	}
	return n
}
