package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/savepoint-dev/savepoint/internal/addr"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

const (
	// EnvAutostart, set to "0", stops the clients from starting savepointd
	// on demand.
	EnvAutostart = "SAVEPOINT_AUTOSTART"
	// EnvDaemonPath names the savepointd binary a client starts on demand;
	// unset, the Go client takes savepointd from PATH (the Python and
	// TypeScript clients the one their package carries).
	EnvDaemonPath = "SAVEPOINTD_PATH"
)

// autostartTimeout bounds how long a client waits for the daemon it
// started to report SERVING; autostartGrace how long, once its own daemon
// exited, it waits for another client's daemon (the one that took the data
// directory's lock) to answer.
const (
	autostartTimeout = 30 * time.Second
	autostartGrace   = 5 * time.Second
)

// systemAddr is addr.System; tests point it elsewhere.
var systemAddr = addr.System

// autostarter starts savepointd on demand at the per-user default address
// (see docs/install.md): with its data in STATE/data, its log in
// STATE/savepointd.log, detached from the calling process.
type autostarter struct {
	addr     string // "unix:" + sock
	sock     string
	stateDir string
	getenv   func(string) string
	stderr   io.Writer

	mu sync.Mutex // one start at a time within the process
}

// newAutostarter returns the autostarter of a client that chose no address,
// or nil when starting on demand is off (SAVEPOINT_AUTOSTART=0), an address
// was chosen (SAVEPOINT_ADDR), or there is no per-user default (no
// XDG_STATE_HOME and no HOME).
func newAutostarter(getenv func(string) string) *autostarter {
	if getenv(addr.Env) != "" || getenv(EnvAutostart) == "0" {
		return nil
	}
	state := addr.StateDir(getenv)
	if state == "" {
		return nil
	}
	a := addr.Default(getenv)
	return &autostarter{addr: a, sock: strings.TrimPrefix(a, "unix:"), stateDir: state, getenv: getenv, stderr: os.Stderr}
}

// ensure returns the address to use once something answers there: the
// per-user default when a daemon answers there; else the system's daemon
// (addr.System, contrib/systemd) when one answers there, which starts
// nothing; else the per-user default after starting savepointd there. Its
// error wraps ErrUnavailable and, when the daemon it started failed, quotes
// the last lines of the daemon's log.
func (a *autostarter) ensure(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if answers(a.sock) {
		return a.addr, nil
	}
	if a.addr != systemAddr && answers(strings.TrimPrefix(systemAddr, "unix:")) {
		return systemAddr, nil
	}
	return a.addr, a.start(ctx)
}

// start starts savepointd at the per-user default and waits until it (or
// another client's, which won the race) reports SERVING.
func (a *autostarter) start(ctx context.Context) error {
	bin := a.getenv(EnvDaemonPath)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("savepointd"); err != nil {
			return fmt.Errorf("%w: nothing answers at %s and no savepointd was found on PATH to start on demand; "+
				"install savepointd (pip install savepoint, npm install @savepoint-dev/client, a release archive or make install: see docs/install.md), "+
				"or set %s to a running daemon's address", ErrUnavailable, a.addr, addr.Env)
		}
	}
	if err := privateDir(a.stateDir); err != nil {
		return fmt.Errorf("%w: cannot start savepointd on demand: %v", ErrUnavailable, err)
	}
	logPath := filepath.Join(a.stateDir, "savepointd.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: cannot start savepointd on demand: %v", ErrUnavailable, err)
	}
	defer logf.Close()
	from, _ := logf.Seek(0, io.SeekEnd)
	dataDir := filepath.Join(a.stateDir, "data")
	cmd := exec.Command(bin, "--data-dir", dataDir, "--listen", a.addr, "--started-on-demand", "--log-file", logPath)
	cmd.Env = daemonEnv(os.Environ())
	cmd.Dir = a.stateDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: cannot start %s on demand: %v", ErrUnavailable, bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // reaps it if it exits while this process lives
	pid, err := a.waitServing(ctx, exited)
	if err != nil {
		return fmt.Errorf("%w: savepointd started on demand at %s did not start: %v%s", ErrUnavailable, a.addr, err, logTail(logPath, from))
	}
	if pid == cmd.Process.Pid {
		fmt.Fprintf(a.stderr, "savepoint: started savepointd on demand at %s (pid %d), data in %s, log in %s\n", a.addr, pid, dataDir, logPath)
	}
	return nil
}

// waitServing waits until the daemon at the socket reports SERVING and
// returns its pid: the one just started, or another client's that won the
// data directory's lock, which the one started then exits for (exited).
func (a *autostarter) waitServing(ctx context.Context, exited <-chan struct{}) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, autostartTimeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.sock)
		}))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var graceEnd <-chan time.Time
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if answers(a.sock) {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			h, herr := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
			var info *savepointv1.GetServerInfoResponse
			if herr == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				info, herr = savepointv1.NewSavepointServiceClient(conn).GetServerInfo(cctx, &savepointv1.GetServerInfoRequest{})
			}
			ccancel()
			if herr == nil && info != nil {
				return int(info.GetPid()), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no SERVING within %s: %w", autostartTimeout, ctx.Err())
		case <-exited:
			exited = nil
			graceEnd = time.After(autostartGrace)
		case <-graceEnd:
			return 0, errors.New("it exited, and no other daemon answers")
		case <-tick.C:
		}
	}
}

// answers reports whether something accepts connections on the socket.
func answers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// privateDir creates dir (mode 0700) when missing and checks that it is a
// directory the user owns that no one else may enter, fixing its mode when
// the user owns it: the socket in it must be one no other user could have
// put there.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d)", dir, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// daemonEnv is the environment of a daemon started on demand: the caller's
// without SAVEPOINT_* settings, which are the caller's and not the
// daemon's (a SAVEPOINT_STORE_URL, say); its flags say the rest.
func daemonEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SAVEPOINT_") {
			out = append(out, kv)
		}
	}
	return out
}

// logTail returns the last lines the daemon wrote to its log from offset
// from on (from the start when the daemon rotated the log meanwhile and it
// is shorter now), as text to end an error with, or "" when it wrote none.
func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if int64(len(b)) < from {
		from = 0
	}
	if err != nil || int64(len(b)) == from {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b[from:], "\n"), []byte("\n"))
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return fmt.Sprintf("; the last lines of its log (%s):\n%s", path, bytes.Join(lines, []byte("\n")))
}
