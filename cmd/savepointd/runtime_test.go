package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestRuntimeSettings checks, through the running daemon's /metrics, the
// collector's target percentage and soft memory limit savepointd sets: its
// defaults on each store, --memory-limit, and GOGC and GOMEMLIMIT, which win.
func TestRuntimeSettings(t *testing.T) {
	bin := daemontest.Binary(t)
	var pg *pgtest.Server
	storeURL := func() string {
		if pg == nil {
			pg = pgtest.New(t)
		}
		return pg.URL(pg.NewDatabase(t))
	}
	for _, tt := range []struct {
		name        string
		postgres    bool
		args, env   []string
		gogc, limit float64
	}{
		{"embedded", false, nil, nil, 100, daemon.DefaultMemoryLimit}, // Go's own
		{"embedded, flag", false, []string{"--memory-limit", "96MiB"}, nil, 100, 96 << 20},
		{"embedded, environment", false, []string{"--memory-limit", "96MiB"}, []string{"GOGC=150", "GOMEMLIMIT=100MiB"}, 150, 100 << 20},
		{"postgres", true, nil, nil, daemon.PostgresGCPercent, daemon.DefaultMemoryLimit},
		{"postgres, environment", true, nil, []string{"GOGC=150"}, 150, daemon.DefaultMemoryLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sock := daemontest.SocketPath(t)
			args := []string{"--data-dir", filepath.Join(dir, "data"), "--listen", "unix:" + sock, "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}
			if tt.postgres {
				args = append(args, "--store-url", storeURL())
			}
			cmd := exec.Command(bin, append(args, tt.args...)...)
			cmd.Env = append(withoutRuntimeEnv(os.Environ()), tt.env...)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			addr, err := metricsAddr(stderr, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := scrape(t, "http://"+addr+"/metrics", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes")
			if got["go_gc_gogc_percent"] != tt.gogc || got["go_gc_gomemlimit_bytes"] != tt.limit {
				t.Errorf("go_gc_gogc_percent %v, go_gc_gomemlimit_bytes %v; want %v and %v",
					got["go_gc_gogc_percent"], got["go_gc_gomemlimit_bytes"], tt.gogc, tt.limit)
			}
		})
	}
}

// withoutRuntimeEnv drops GOGC and GOMEMLIMIT from env, so that the test's
// own environment cannot decide what it checks.
func withoutRuntimeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return out
}

// metricsAddr reads the daemon's JSON log lines until the one that says
// where it serves metrics, and returns that address; the rest of the log is
// drained in the background so that the daemon never blocks on it.
func metricsAddr(r io.Reader, timeout time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"metrics_addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving metrics" {
				select {
				case found <- line.Addr:
				default:
				}
			}
		}
		close(found)
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			return "", fmt.Errorf("savepointd exited without serving metrics")
		}
		return addr, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("savepointd did not serve metrics within %v", timeout)
	}
}

// scrape returns the values of the named unlabelled metrics at url.
func scrape(t *testing.T, url string, names ...string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		for _, n := range names {
			if ok && name == n {
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					t.Fatalf("%s: %v", sc.Text(), err)
				}
				got[n] = v
			}
		}
	}
	if len(got) != len(names) {
		t.Fatalf("%s lacks some of %v: got %v", url, names, got)
	}
	return got
}
