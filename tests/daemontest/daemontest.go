// Package daemontest starts savepointd for tests: the real binary as a child
// process, or the same server in-process, each on a short Unix socket path
// and a data directory that the test owns. It serves the tests of every
// package that needs a whole daemon (tests/integration, tests/crashtest, the
// clients and the commands). It lives under tests/, as etcd's harnesses do,
// because it drives the daemon through the Go client: nothing under daemon/
// may import it.
package daemontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/internal/addr"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

var (
	buildMu sync.Mutex
	builds  = map[string]string{} // "pkg flags" -> binary
)

// Build builds the main package pkg (an import path) with the given build
// tags once per test process and returns the binary's path.
func Build(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	var args []string
	if len(tags) > 0 {
		args = []string{"-tags", strings.Join(tags, ",")}
	}
	return build(t, pkg, args)
}

// BuildFaults builds savepointd with -tags savepoint_faults, injecting the
// named faults of daemon/internal/faults ("broken", "nosync", "nodirsync",
// "smallvlog"), once per test process and returns the binary's path.
func BuildFaults(t testing.TB, faults ...string) string {
	t.Helper()
	return build(t, savepointd, []string{"-tags", "savepoint_faults", "-ldflags",
		"-X github.com/savepoint-dev/savepoint/daemon/internal/faults.names=" + strings.Join(faults, ",")})
}

// savepointd is the import path of the daemon's main package.
const savepointd = "github.com/savepoint-dev/savepoint/cmd/savepointd"

func build(t testing.TB, pkg string, flags []string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	id := pkg + " " + strings.Join(flags, " ")
	if bin, ok := builds[id]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "spbin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := append(append([]string{"build", "-o", bin}, flags...), pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	builds[id] = bin
	return bin
}

// Binary builds cmd/savepointd once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	return Build(t, savepointd)
}

// SocketPath returns a fresh socket path short enough for a Unix socket
// (t.TempDir paths can pass the ~107-byte limit); it is removed at cleanup.
func SocketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

// Daemon is a savepointd child process. Its connection and client stay valid
// across Kill and Restart.
type Daemon struct {
	t       testing.TB
	Bin     string
	DataDir string
	Socket  string
	Args    []string // extra flags
	Env     []string // added to the test's environment, later entries winning; nil adds nothing
	Conn    *grpc.ClientConn
	Client  savepointv1.SavepointServiceClient

	cmd    *exec.Cmd
	stderr *SyncBuffer
	done   chan struct{}
}

// SyncBuffer is a bytes.Buffer that a child process's output copier (or a
// logger) and the test may use at once.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// From returns what was written from byte off on ("" when off is past the
// end), so that a poller need not copy the whole buffer each time.
func (b *SyncBuffer) From(off int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off >= b.buf.Len() {
		return ""
	}
	return string(b.buf.Bytes()[off:])
}

// Start starts savepointd with a new data directory and extra flags, waits
// until it serves, and stops it at cleanup.
func Start(t testing.TB, args ...string) *Daemon {
	t.Helper()
	return StartBinary(t, Binary(t), args...)
}

// StartBinary is Start with the savepointd binary bin.
func StartBinary(t testing.TB, bin string, args ...string) *Daemon {
	t.Helper()
	return StartBinaryEnv(t, bin, nil, args...)
}

// StartBinaryEnv is StartBinary with env added to the test's environment
// (Daemon.Env).
func StartBinaryEnv(t testing.TB, bin string, env []string, args ...string) *Daemon {
	t.Helper()
	d := &Daemon{t: t, Bin: bin, DataDir: t.TempDir(), Socket: SocketPath(t), Args: args, Env: env}
	d.Restart()
	conn, err := grpc.NewClient("unix:"+d.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	d.Conn, d.Client = conn, savepointv1.NewSavepointServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		d.Kill()
	})
	return d
}

// Restart starts the process again (after Kill or Stop) and waits until it
// serves.
func (d *Daemon) Restart() {
	d.t.Helper()
	args := append([]string{"--data-dir", d.DataDir, "--listen", "unix:" + d.Socket}, d.Args...)
	d.cmd = exec.Command(d.Bin, args...)
	if d.Env != nil {
		d.cmd.Env = append(os.Environ(), d.Env...)
	}
	d.stderr = &SyncBuffer{}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.done) }()
	if err := WaitServing(d.Socket, 20*time.Second, d.done); err != nil {
		d.t.Fatalf("savepointd did not start: %v\nstderr:\n%s", err, d.stderr)
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (d *Daemon) Kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.cmd.Process.Kill()
	<-d.done
}

// Stop sends SIGTERM and returns the exit code.
func (d *Daemon) Stop() int {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.t.Fatalf("savepointd did not stop on SIGTERM\nstderr:\n%s", d.stderr)
	}
	return d.cmd.ProcessState.ExitCode()
}

// Stderr returns what the current process has logged so far.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// WaitServing waits until savepointd on socket reports SERVING
// (client.WaitServing), failing after timeout or as soon as exited is closed.
func WaitServing(socket string, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := client.WaitServing(ctx, "unix:"+socket)
	select {
	case <-exited:
		if err != nil {
			return fmt.Errorf("process exited")
		}
	default:
	}
	return err
}

// InProcess is the same server run inside the test process.
type InProcess struct {
	Socket string
	Store  *badgerstore.Store
	Conn   *grpc.ClientConn
	Client savepointv1.SavepointServiceClient
}

// StartInProcess serves an on-disk store in the test process with cfg
// (zero fields take their defaults) and stops it at cleanup.
func StartInProcess(t testing.TB, cfg daemon.Config) *InProcess {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Listen = "unix:" + SocketPath(t)
	store, stop, err := Serve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		stop()
	})
	return &InProcess{Socket: strings.TrimPrefix(cfg.Listen, "unix:"), Store: store, Conn: conn, Client: savepointv1.NewSavepointServiceClient(conn)}
}

// Running is a daemon.Run in the test process on any address, with the
// logger the test gives.
type Running struct {
	Store *badgerstore.Store
	Cfg   daemon.Config // as given, with DataDir set
}

// RunInProcess opens a store in cfg.DataDir (a new temporary directory
// when empty) and runs daemon.Run on cfg.Listen as given, a Unix socket or a
// TCP address, logging to logger; it returns once the listener accepts
// connections, and stops the daemon at cleanup. Run's error, if it fails to
// start, fails the test.
func RunInProcess(t testing.TB, cfg daemon.Config, logger *slog.Logger) *Running {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	store, err := badgerstore.Open(cfg.DataDir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan error, 1)
	go func() { exited <- daemon.Run(ctx, cfg, store, logger) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		store.Close()
	})
	network, address, err := addr.Parse(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("daemon.Run: %v", err)
		default:
		}
		if c, err := net.DialTimeout(network, address, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s", cfg.Listen)
		}
	}
	return &Running{Store: store, Cfg: cfg}
}

// Serve opens a store in cfg.DataDir and serves it on cfg.Listen (a unix
// socket) in this process until stop is called, which also closes the store.
// It is for a TestMain, where there is no testing.TB.
func Serve(cfg daemon.Config) (store *badgerstore.Store, stop func(), err error) {
	store, err = badgerstore.Open(cfg.DataDir, badgerstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = daemon.Run(ctx, cfg, store, slog.New(slog.DiscardHandler))
	}()
	stop = func() {
		cancel()
		<-exited
		store.Close()
	}
	if err := WaitServing(strings.TrimPrefix(cfg.Listen, "unix:"), 20*time.Second, exited); err != nil {
		stop()
		return nil, nil, errors.Join(err, runErr)
	}
	return store, stop, nil
}
