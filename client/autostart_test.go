package client_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// helperEnv makes the test binary run autostartHelper instead of the tests
// (TestMain), as a client process of its own would.
const helperEnv = "SAVEPOINT_TEST_AUTOSTART_HELPER"

// autostartHelper dials with no address, asks the daemon for its info and
// prints "pid N on-demand B"; with the helper set to "kill", it then kills
// that daemon with SIGKILL and asks again through the same client.
func autostartHelper() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, "")
	if err != nil {
		fmt.Printf("dial error: %s\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		return 0
	}
	defer c.Close()
	for i := 0; ; i++ {
		if i == 1 { // a call the client retries: it starts the daemon again
			if _, err := c.Raw().ListSessions(ctx, &savepointv1.ListSessionsRequest{}); err != nil {
				fmt.Printf("call error: %s\n", strings.ReplaceAll(err.Error(), "\n", " | "))
				return 0
			}
		}
		info, err := c.Raw().GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
		if err != nil {
			fmt.Printf("call error: %s\n", strings.ReplaceAll(err.Error(), "\n", " | "))
			return 0
		}
		fmt.Printf("pid %d on-demand %v\n", info.GetPid(), info.GetStartedOnDemand())
		if os.Getenv(helperEnv) != "kill" || i == 1 {
			return 0
		}
		syscall.Kill(int(info.GetPid()), syscall.SIGKILL)
		for syscall.Kill(int(info.GetPid()), 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// autostartEnv is a user with a home and state directory of its own and
// no XDG_RUNTIME_DIR, so that the default socket is STATE/savepoint.sock.
type autostartEnv struct {
	t     *testing.T
	state string // the per-user state directory, STATE
	env   []string
	mu    sync.Mutex
	pids  map[int]bool // daemons seen, killed at the end
}

func newAutostartEnv(t *testing.T, extra ...string) *autostartEnv {
	home, err := os.MkdirTemp("", "spa")
	if err != nil {
		t.Fatal(err)
	}
	e := &autostartEnv{t: t, state: filepath.Join(home, "st", "savepoint"), pids: map[int]bool{}}
	t.Cleanup(func() {
		for pid := range e.pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		os.RemoveAll(home)
	})
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "HOME" || k == "XDG_RUNTIME_DIR" || k == "XDG_STATE_HOME" || strings.HasPrefix(k, "SAVEPOINT") {
			continue
		}
		env = append(env, kv)
	}
	e.env = append(env, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "st"),
		client.EnvDaemonPath+"="+savepointdBinary(t), helperEnv+"=1")
	e.env = append(e.env, extra...)
	return e
}

// result is what one helper process printed.
type result struct {
	pids     []int
	onDemand bool
	err      string // the error it printed, if any
	stderr   string
}

// run runs one helper process with the environment and extra variables.
func (e *autostartEnv) run(extra ...string) result {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append([]string{}, e.env...), extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("helper: %v\n%s\n%s", err, out, stderr.String())
	}
	r := result{stderr: stderr.String()}
	// Every daemon started is killed at the end, even one no call reached.
	for _, m := range startedPid.FindAllStringSubmatch(r.stderr, -1) {
		pid, _ := strconv.Atoi(m[1])
		e.mu.Lock()
		e.pids[pid] = true
		e.mu.Unlock()
	}
	for line := range strings.Lines(string(out)) {
		var pid int
		var od bool
		if _, err := fmt.Sscanf(line, "pid %d on-demand %t", &pid, &od); err == nil {
			r.pids, r.onDemand = append(r.pids, pid), od
			e.mu.Lock()
			e.pids[pid] = true
			e.mu.Unlock()
		} else if strings.Contains(line, "error") {
			r.err += line
		}
	}
	if r.err == "" && len(r.pids) == 0 {
		e.t.Fatalf("helper printed neither a pid nor an error:\n%s", out)
	}
	return r
}

func (r result) mustServe(t *testing.T) int {
	t.Helper()
	if r.err != "" || len(r.pids) == 0 || !r.onDemand {
		t.Fatalf("want a daemon started on demand, got %+v", r)
	}
	return r.pids[len(r.pids)-1]
}

var startedPid = regexp.MustCompile(`\(pid (\d+)\)`)

const startedLine = "savepoint: started savepointd on demand at unix:"

func TestAutostartNothingListening(t *testing.T) {
	e := newAutostartEnv(t)
	r := e.run()
	pid := r.mustServe(t)
	if strings.Count(r.stderr, startedLine) != 1 || !strings.Contains(r.stderr, filepath.Join(e.state, "savepointd.log")) {
		t.Errorf("stderr of the client that started it: %q", r.stderr)
	}
	if fi, err := os.Stat(e.state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v; want mode 0700", fi, err)
	}
	if _, err := os.Stat(filepath.Join(e.state, "data")); err != nil {
		t.Errorf("data directory: %v", err)
	}
	// A second client finds it and starts nothing.
	r2 := e.run()
	if got := r2.mustServe(t); got != pid || r2.stderr != "" {
		t.Errorf("second client: pid %d (want %d), stderr %q", got, pid, r2.stderr)
	}
}

func TestAutostartStaleSocket(t *testing.T) {
	e := newAutostartEnv(t)
	pid := e.run().mustServe(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Lstat(filepath.Join(e.state, "savepoint.sock")); err != nil {
		t.Fatalf("want the killed daemon's socket file left behind: %v", err)
	}
	r := e.run()
	if got := r.mustServe(t); got == pid || !strings.Contains(r.stderr, startedLine) {
		t.Errorf("after a stale socket: pid %d (the killed one was %d), stderr %q", got, pid, r.stderr)
	}
}

func TestAutostartRestartsAfterKill(t *testing.T) {
	e := newAutostartEnv(t)
	r := e.run(helperEnv + "=kill")
	if r.err != "" || len(r.pids) != 2 || r.pids[0] == r.pids[1] || !r.onDemand {
		t.Fatalf("want two daemons, the second started after the first was killed: %+v", r)
	}
	if n := strings.Count(r.stderr, startedLine); n != 2 {
		t.Errorf("want a line for each start, got %d: %q", n, r.stderr)
	}
}

func TestAutostartRace(t *testing.T) {
	e := newAutostartEnv(t)
	const n = 4
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() { results[i] = e.run() })
	}
	wg.Wait()
	lines := 0
	for _, r := range results {
		if got, want := r.mustServe(t), results[0].pids[0]; got != want {
			t.Errorf("clients reached two daemons: %d and %d", got, want)
		}
		lines += strings.Count(r.stderr, startedLine)
	}
	if lines != 1 {
		t.Errorf("want one client to say it started the daemon, %d did", lines)
	}
}

func TestAutostartOff(t *testing.T) {
	e := newAutostartEnv(t)
	sock := "unix:" + filepath.Join(e.state, "savepoint.sock")
	for _, tc := range []struct{ name, env string }{
		{"SAVEPOINT_AUTOSTART=0", client.EnvAutostart + "=0"},
		{"explicit address", client.EnvAddr + "=" + sock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(tc.env)
			if !strings.Contains(strings.ToLower(r.err), "unavailable") || len(r.pids) != 0 || r.stderr != "" {
				t.Errorf("want UNAVAILABLE and nothing started, got %+v", r)
			}
			if _, err := os.Stat(e.state); !os.IsNotExist(err) {
				t.Errorf("the state directory was created: %v", err)
			}
		})
	}
}

// TestAutostartExplicitArgument: an address given to Dial starts nothing,
// even the default one.
func TestAutostartExplicitArgument(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SAVEPOINT_ADDR", "")
	t.Setenv("HOME", dir)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(client.EnvDaemonPath, "/bin/false-not-run")
	c, err := client.Dial(context.Background(), client.DefaultAddr(), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Raw().GetServerInfo(context.Background(), &savepointv1.GetServerInfoRequest{})
	if err == nil || !strings.Contains(err.Error(), "navailable") {
		t.Errorf("want UNAVAILABLE, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".local")); !os.IsNotExist(err) {
		t.Errorf("something was created in the home directory: %v", err)
	}
}

func TestAutostartFailingDaemon(t *testing.T) {
	e := newAutostartEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	// A file where the data directory should be: the daemon cannot open it.
	if err := os.WriteFile(filepath.Join(e.state, "data"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run()
	if !strings.Contains(r.err, "did not start") || !strings.Contains(r.err, "the last lines of its log") || len(r.pids) != 0 {
		t.Fatalf("want the daemon's failure with its log, got %+v", r)
	}
	log, _ := os.ReadFile(filepath.Join(e.state, "savepointd.log"))
	lastLine := strings.TrimSpace(string(log))
	lastLine = lastLine[strings.LastIndex(lastLine, "\n")+1:]
	if lastLine == "" || !strings.Contains(r.err, lastLine) {
		t.Errorf("the error does not quote the log's last line %q:\n%s", lastLine, r.err)
	}
}

// TestAutostartNoBinary: with no savepointd to start, the error says how to
// get one.
func TestAutostartNoBinary(t *testing.T) {
	e := newAutostartEnv(t, client.EnvDaemonPath+"=", "PATH=/nonexistent")
	r := e.run()
	if !strings.Contains(r.err, "no savepointd was found") || !strings.Contains(r.err, "docs/install.md") {
		t.Errorf("got %+v", r)
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// savepointdBinary builds cmd/savepointd once, from the module's root
// (TestMain has moved the working directory).
func savepointdBinary(t *testing.T) string {
	binOnce.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "spbin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "savepointd")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/savepointd")
		cmd.Dir = filepath.Join(filepath.Dir(self), "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestAutostartLogRotated: the daemon started on demand rotates its log
// (savepointd --log-file, which the client passes): a log already at the
// 4 MiB limit becomes savepointd.log.1 at the daemon's first line, and the
// error of a daemon that fails to start still quotes the lines it wrote to
// the new file.
func TestAutostartLogRotated(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(fmt.Sprintf("failing=%t", failing), func(t *testing.T) {
			e := newAutostartEnv(t)
			if err := os.MkdirAll(e.state, 0o700); err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(e.state, "savepointd.log")
			old := strings.Repeat("an old line\n", 4<<20/12+1)
			if err := os.WriteFile(logPath, []byte(old), 0o600); err != nil {
				t.Fatal(err)
			}
			if failing {
				if err := os.WriteFile(filepath.Join(e.state, "data"), []byte("not a directory"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := e.run()
			if failing {
				if !strings.Contains(r.err, "did not start") || !strings.Contains(r.err, "the last lines of its log") {
					t.Fatalf("want the daemon's failure with its log, got %+v", r)
				}
			} else {
				r.mustServe(t)
			}
			if prev, err := os.ReadFile(logPath + ".1"); err != nil || string(prev) != old {
				t.Errorf("%s.1: %d bytes, %v; want the old log whole", logPath, len(prev), err)
			}
			cur, err := os.ReadFile(logPath)
			if err != nil || len(cur) == 0 || len(cur) > 64<<10 || strings.Contains(string(cur), "an old line") {
				t.Fatalf("%s: %d bytes, %v; want only the daemon's new lines", logPath, len(cur), err)
			}
			last := strings.TrimSpace(string(cur))
			last = last[strings.LastIndex(last, "\n")+1:]
			if failing && !strings.Contains(r.err, last) {
				t.Errorf("the error does not quote the new log's last line %q:\n%s", last, r.err)
			}
		})
	}
}
