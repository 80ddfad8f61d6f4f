// Package pgtest runs a real PostgreSQL server for tests, from the system's
// binaries (/usr/lib/postgresql/*/bin): initdb into a temporary directory,
// a Unix socket in a short temporary path, a free loopback port. As root it
// runs initdb and postgres as the postgres user, since both refuse root. It
// installs Debian's postgresql package when the binaries are missing and it
// can (root with apt-get), and otherwise fails the test: it never skips.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one PostgreSQL server. Stop and Start may be called in turn; the
// server keeps its data directory and port across them.
type Server struct {
	Dir  string // holds data/, the socket and the log
	Port int
	// Durable runs postgres with fsync on, as a production server, for
	// figures a benchmark can quote; false runs it with fsync off.
	Durable bool
	bin     string
	cred    *syscall.Credential // nil: run as this process's user

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd ends.
	exited chan struct{}
}

var (
	installOnce sync.Once
	installErr  error
)

// binDir returns the newest /usr/lib/postgresql/*/bin holding initdb and
// postgres, installing the postgresql package once if there is none.
func binDir() (string, error) {
	find := func() string {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int {
			va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
			vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
			return vb - va
		})
		for _, d := range dirs {
			if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
				return d
			}
		}
		return ""
	}
	if d := find(); d != "" {
		return d, nil
	}
	installOnce.Do(func() {
		if os.Geteuid() != 0 {
			installErr = fmt.Errorf("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres) and installing it needs root: apt-get install postgresql")
			return
		}
		out, err := exec.Command("sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq postgresql").CombinedOutput()
		if err != nil {
			installErr = fmt.Errorf("PostgreSQL is not installed, and apt-get install postgresql failed: %v\n%s", err, out)
		}
	})
	if installErr != nil {
		return "", installErr
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("apt-get installed postgresql, but no /usr/lib/postgresql/*/bin holds initdb and postgres")
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// New starts a server of its own for t and stops and removes it at cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Remove)
	return s
}

// NewDurable is New with fsync and full_page_writes on, for tests that stop
// the server with an immediate shutdown (Crash) and count on its WAL.
func NewDurable(t testing.TB) *Server {
	t.Helper()
	s, err := start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Remove)
	return s
}

// Start initializes and starts a server; the caller calls Remove.
func Start() (*Server, error) { return start(false) }

// StartDurable is Start with fsync on (Server.Durable), for benchmarks.
func StartDurable() (*Server, error) { return start(true) }

func start(durable bool) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, Durable: durable}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user to run as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	out, err := s.command("initdb", "-D", s.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.StartServer(); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartServer starts postgres on the server's data directory and waits
// until it accepts connections. fsync is off unless s.Durable: the tests
// stop the server cleanly, never by a crash of the machine.
func (s *Server) StartServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("postgres is running already")
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	durability := []string{"-c", "fsync=off", "-c", "full_page_writes=off"}
	if s.Durable {
		durability = []string{"-c", "fsync=on", "-c", "full_page_writes=on", "-c", "synchronous_commit=on"}
	}
	cmd := s.command("postgres", append(append([]string{"-D", s.dataDir(), "-k", s.Dir, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, durability...),
		"-c", "max_connections=300", "-c", "shared_buffers=32MB")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres does not accept connections after 60s: %v\n%s", err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopServer stops postgres with a fast shutdown (SIGINT: open sessions are
// ended, everything committed is kept) and waits for it to exit.
func (s *Server) StopServer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Crash stops postgres with an immediate shutdown (pg_ctl stop -m
// immediate: every server process quits at once, without a checkpoint, and
// the next start replays the WAL) and waits for it to exit. It fails the
// test when pg_ctl does.
func (s *Server) Crash(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatal("Crash: postgres is not running")
	}
	if out, err := s.command("pg_ctl", "stop", "-D", s.dataDir(), "-m", "immediate", "-w", "-t", "30").CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("postgres did not exit after pg_ctl stop -m immediate")
	}
	s.cmd = nil
}

// Remove stops the server and deletes its directory.
func (s *Server) Remove() {
	s.StopServer()
	os.RemoveAll(s.Dir)
}

// Log returns the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
	return string(b)
}

// URL is the postgres:// URL of database db over the server's Unix socket,
// as user postgres; extra is appended to its query ("k=v&k2=v2").
func (s *Server) URL(db string, extra ...string) string {
	u := fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d", db, s.Dir, s.Port)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// TCPURL is URL over loopback TCP.
func (s *Server) TCPURL(db string, extra ...string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// Exec runs sql in database db.
func (s *Server) Exec(t testing.TB, db, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

var dbSeq atomic.Int64

// NewDatabase creates an empty database for t and returns its name; it is
// dropped at cleanup.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	s.Exec(t, "postgres", "CREATE DATABASE "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, s.URL("postgres")); err == nil {
			c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	return name
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the test process's shared server, started on first use;
// Main stops it. Tests that stop or damage a server use New instead.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Main runs the tests and then removes the shared server: call it as
// os.Exit(pgtest.Main(m)) from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if code != 0 && strings.TrimSpace(shared.Log()) != "" {
			fmt.Fprintf(os.Stderr, "--- the shared PostgreSQL server's log:\n%s\n", tail(shared.Log(), 4000))
		}
		shared.Remove()
	}
	return code
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Replicated makes s a primary a streaming standby can follow: it keeps
// up to 1 GB of WAL for standbys that fall behind, reports its commit to
// the standbys at once, and with synchronous set waits, at each commit, for
// a standby to have flushed it (synchronous_standby_names '*',
// synchronous_commit on). The settings go in postgresql.auto.conf, so a
// standby made from s (NewStandby) has them too and keeps them when
// promoted.
func (s *Server) Replicated(synchronous bool) error {
	names := "''"
	if synchronous {
		names = "'*'"
	}
	for _, sql := range []string{
		"ALTER SYSTEM SET wal_keep_size = '1GB'",
		"ALTER SYSTEM SET synchronous_standby_names = " + names,
		"ALTER SYSTEM SET synchronous_commit = on",
		"ALTER SYSTEM SET wal_sender_timeout = '5s'",
		"ALTER SYSTEM SET wal_receiver_status_interval = '1s'",
		"SELECT pg_reload_conf()",
	} {
		if err := s.exec(sql); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// NewStandby starts a new server, a streaming standby of s made with
// pg_basebackup -R; the caller calls Remove.
func (s *Server) NewStandby() (*Server, error) { return s.NewStandbyVia(s.Port) }

// NewStandbyVia is NewStandby replicating through port on loopback (a
// Proxy to s), rather than straight from s.
func (s *Server) NewStandbyVia(port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		return nil, err
	}
	st := &Server{Dir: dir, bin: s.bin, cred: s.cred, Durable: s.Durable}
	if st.cred != nil {
		if err := os.Chown(dir, int(st.cred.Uid), int(st.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if st.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := st.FollowVia(s, port); err != nil {
		st.Remove()
		return nil, err
	}
	return st, nil
}

// Follow makes s, stopped, a fresh streaming standby of primary: it removes
// s's data directory, copies primary's with pg_basebackup -R and starts s
// on it, keeping its port. It is how an old primary comes back after a
// failover without pg_rewind.
func (s *Server) Follow(primary *Server) error { return s.FollowVia(primary, primary.Port) }

// FollowVia is Follow replicating through port on loopback (a Proxy to
// primary); the copy itself is taken from primary directly.
func (s *Server) FollowVia(primary *Server, port int) error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return fmt.Errorf("Follow: postgres is running; stop it first")
	}
	if err := os.RemoveAll(s.dataDir()); err != nil {
		return err
	}
	out, err := s.command("pg_basebackup", "-D", s.dataDir(), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port),
		"-U", "postgres", "-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	if port != primary.Port {
		conf := filepath.Join(s.dataDir(), "postgresql.auto.conf")
		b, err := os.ReadFile(conf)
		if err != nil {
			return err
		}
		via := strings.Replace(string(b), fmt.Sprintf(" port=%d ", primary.Port), fmt.Sprintf(" port=%d ", port), 1)
		if via == string(b) {
			return fmt.Errorf("pg_basebackup -R wrote no primary_conninfo with port=%d:\n%s", primary.Port, b)
		}
		if err := os.WriteFile(conf, []byte(via), 0o600); err != nil {
			return err
		}
	}
	return s.StartServer()
}

// Promote ends s's recovery (pg_ctl promote) and waits until it accepts
// writes.
func (s *Server) Promote() error {
	if out, err := s.command("pg_ctl", "promote", "-D", s.dataDir(), "-w", "-t", "60").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

// Kill stops postgres at once, as a host dying does: with immediate, pg_ctl
// stop -m immediate (every process quits without a checkpoint); without,
// SIGKILL of the postmaster, whose backends then notice its death and quit.
// It returns once no process of s is left.
func (s *Server) Kill(immediate bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("Kill: postgres is not running")
	}
	if immediate {
		if out, err := s.command("pg_ctl", "stop", "-D", s.dataDir(), "-m", "immediate", "-w", "-t", "30").CombinedOutput(); err != nil {
			return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
		}
	} else {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("postgres did not exit")
	}
	s.cmd = nil
	// The backends of a postmaster killed by SIGKILL notice its death and
	// quit; wait for the data directory's lock file to be free of them.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !s.backendsAlive() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("postgres's backends outlived its postmaster by 30s")
}

// backendsAlive reports whether a process still has s's data directory as
// its working directory (a backend outliving its postmaster).
func (s *Server) backendsAlive() bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if d, err := os.Readlink(p); err == nil && d == s.dataDir() {
			return true
		}
	}
	return false
}

// InRecovery reports whether s is a standby; it fails when s does not answer.
func (s *Server) InRecovery() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return false, err
	}
	defer c.Close(context.Background())
	var in bool
	err = c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&in)
	return in, err
}

// WaitSyncStandby waits until s, a primary, has a standby streaming in
// sync (pg_stat_replication.sync_state 'sync'), up to d.
func (s *Server) WaitSyncStandby(d time.Duration) error {
	return s.waitUntil(d, "a synchronous standby streams", `SELECT count(*) > 0 FROM pg_stat_replication
		WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')`)
}

// WaitReplayed waits until every standby streaming from s, a primary, has
// replayed all that s has written so far, up to d. synchronous_commit=on
// waits only for the standby to flush a commit, not to apply it, so a test
// that reads from a standby right after it kills the primary waits here
// first.
func (s *Server) WaitReplayed(d time.Duration) error {
	return s.waitUntil(d, "its standbys have replayed its log", `SELECT count(*) > 0
		AND count(*) FILTER (WHERE replay_lsn IS NULL OR replay_lsn < pg_current_wal_lsn()) = 0
		FROM pg_stat_replication WHERE state = 'streaming'`)
}

// WaitStreaming waits until s, a primary, has a standby streaming (in sync
// or not), up to d.
func (s *Server) WaitStreaming(d time.Duration) error {
	return s.waitUntil(d, "a standby streams", "SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming'")
}

// waitUntil asks s, on a new connection every 100 ms, the query ready (one
// boolean) until it answers true, up to d; the error says what it waited
// for and the last failure.
func (s *Server) waitUntil(d time.Duration, what, ready string) error {
	var last error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			var ok bool
			err = c.QueryRow(ctx, ready).Scan(&ok)
			c.Close(context.Background())
			if err == nil && ok {
				cancel()
				return nil
			}
		}
		cancel()
		last = err
	}
	return fmt.Errorf("port %d: not the case after %v that %s (%v)", s.Port, d, what, last)
}
