package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// proc runs savepointd as a child process on one data directory and socket,
// across kills and restarts. Unlike daemontest.Daemon it exposes the pid,
// the exit code and a start that may fail, which these tests need.
type proc struct {
	t       testing.TB
	bin     string
	dir     string
	sock    string
	args    []string // extra flags for every start
	cmd     *exec.Cmd
	stderr  *daemontest.SyncBuffer
	done    chan struct{}
	exit    int
	conn    *grpc.ClientConn
	client  savepointv1.SavepointServiceClient
	started time.Duration // how long the last successful start took
}

func newProc(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, bin: bin, dir: filepath.Join(t.TempDir(), "data"), sock: daemontest.SocketPath(t), args: args}
	t.Cleanup(func() {
		p.kill()
		p.closeConn()
	})
	return p
}

// start starts savepointd with extra flags and waits until it serves. It
// returns an error, with the process's stderr, when the process exits
// instead (see exitCode).
func (p *proc) start(extra ...string) error {
	p.t.Helper()
	if p.running() {
		p.t.Fatal("start: savepointd is already running")
	}
	args := append([]string{"--data-dir", p.dir, "--listen", "unix:" + p.sock}, p.args...)
	args = append(args, extra...)
	p.cmd = exec.Command(p.bin, args...)
	p.stderr = &daemontest.SyncBuffer{}
	p.cmd.Stderr = p.stderr
	begin := time.Now()
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	p.done = done
	cmd := p.cmd
	go func() {
		cmd.Wait()
		p.exit = cmd.ProcessState.ExitCode()
		close(done)
	}()
	if err := daemontest.WaitServing(p.sock, 30*time.Second, done); err != nil {
		p.kill()
		return fmt.Errorf("savepointd did not serve (exit code %d): %v\nstderr:\n%s", p.exitCode(), err, p.stderr)
	}
	p.started = time.Since(begin)
	p.dial()
	return nil
}

// mustStart is start that fails the test.
func (p *proc) mustStart(extra ...string) {
	p.t.Helper()
	if err := p.start(extra...); err != nil {
		p.t.Fatal(err)
	}
}

// dial replaces the client connection with a new one, so that no call waits
// out the backoff of a connection to a killed process.
func (p *proc) dial() {
	p.closeConn()
	conn, err := grpc.NewClient("unix:"+p.sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		p.t.Fatal(err)
	}
	p.conn, p.client = conn, savepointv1.NewSavepointServiceClient(conn)
}

func (p *proc) closeConn() {
	if p.conn != nil {
		p.conn.Close()
		p.conn, p.client = nil, nil
	}
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop() int {
	p.t.Helper()
	if !p.running() {
		return p.exitCode()
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, ok := p.wait(30 * time.Second)
	if !ok {
		p.t.Fatalf("savepointd did not stop on SIGTERM\nstderr:\n%s", p.stderr)
	}
	return code
}

// wait waits up to timeout for the process to exit by itself.
func (p *proc) wait(timeout time.Duration) (code int, exited bool) {
	select {
	case <-p.done:
		return p.exit, true
	case <-time.After(timeout):
		return 0, false
	}
}

// exitCode is the last process's exit code (-1 when killed by a signal).
func (p *proc) exitCode() int {
	<-p.done
	return p.exit
}

// run runs savepointd once to completion (for example "verify") and returns
// its exit code, stdout and stderr.
func runBin(bin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		code = -1
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

// binary returns a savepointd built from this tree: the real one, or with
// the broken fault the deliberately broken one.
func binary(t testing.TB, broken bool) string {
	t.Helper()
	if !broken {
		return daemontest.Binary(t)
	}
	return daemontest.BuildFaults(t, "broken")
}

// ctxT is a context for one call made by a test, bounded so that a hung
// daemon fails the test instead of stalling it.
func ctxT() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// ctxVerify is the context of the Verify RPC at the end of a run, which
// reads every record of the store: after a 1,000-cycle soak (1.76 million
// writes) it outlasted ctxT's 20 s on the shared 2-core machine.
func ctxVerify() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 15*time.Minute)
}

// lastLines returns the last n lines of s, for error messages.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
