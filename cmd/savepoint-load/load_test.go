package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestLoad is the short form of `make loadtest`: 256 sessions for 10 s
// against the real savepointd. Any RPC error fails it. It prints the
// latency percentiles and savepointd's RSS but does not judge the RSS: a
// 1 s warm-up is too short for that, and `make loadtest` (60 s) does it.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s load; skipped with -short")
	}
	d := daemontest.Start(t)
	cfg := DefaultConfig()
	cfg.Addr = "unix:" + d.Socket
	cfg.Duration = 10 * time.Second
	cfg.MaxRSSGrowth, cfg.MaxAnonRSS = 0, 0
	res, err := Run(context.Background(), cfg, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures() {
		t.Error(f)
	}
	if res.PID == 0 {
		t.Error("savepointd's pid was not found from the socket's peer, so RSS was not sampled")
	}
	if res.EndAnon <= 0 || res.EndFile < 0 || res.EndAnon+res.EndFile > res.RSSEnd+(1<<20) {
		t.Errorf("anonymous %d + file-backed %d bytes do not make the RSS of %d", res.EndAnon, res.EndFile, res.RSSEnd)
	}
	if _, perSave, ok := res.CPUPerRPC(); !ok || perSave <= 0 {
		t.Errorf("savepointd's CPU per save not measured (%v, %v)", perSave, ok)
	}
	for _, r := range res.RPCs {
		if int64(r.Count) < res.Turns {
			t.Errorf("%s: %d timed calls for %d complete turns", r.Name, r.Count, res.Turns)
		}
	}
	if res.Saves != 2*res.Turns {
		t.Errorf("%d saves for %d turns; want 2 per turn", res.Saves, res.Turns)
	}
}

// TestMaxSavesAndFailures checks that --max-saves stops the run at exactly
// that many saves, and that the run fails (exit 1) on RPC errors and on RSS
// growth, so a passing load test means something.
func TestMaxSavesAndFailures(t *testing.T) {
	d := daemontest.Start(t)
	addr := "unix:" + d.Socket

	var out bytes.Buffer
	code := run(context.Background(), []string{"--addr", addr, "--sessions", "8", "--max-saves", "200", "--duration", "1m", "--max-rss-growth", "0"}, &out, &out)
	if code != 0 || !strings.Contains(out.String(), "throughput: 200 saves in") {
		t.Fatalf("--max-saves 200: exit %d, output:\n%s", code, &out)
	}

	out.Reset()
	code = run(context.Background(), []string{"--addr", addr, "--sessions", "2", "--duration", "500ms", "--rpc-timeout", "1ns"}, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "FAIL: ") || !strings.Contains(out.String(), "DeadlineExceeded") {
		t.Fatalf("every RPC past its deadline: exit %d, want 1 with DeadlineExceeded counted; output:\n%s", code, &out)
	}

	// Anonymous RSS is judged; file-backed RSS (mapped tables) is not.
	r := &Result{Config: Config{MaxRSSGrowth: 1.5}, Saves: 1, WarmAnon: 100 << 20, EndAnon: 151 << 20,
		RSSWarm: 100 << 20, RSSEnd: 151 << 20}
	if f := r.Failures(); len(f) != 1 || !strings.Contains(f[0], "anonymous RSS grew 1.51x") {
		t.Errorf("anonymous RSS 100 -> 151 MiB with a 1.5x limit: failures %q", f)
	}
	r.EndAnon, r.RSSEnd, r.EndFile = 149<<20, 900<<20, 751<<20
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("anonymous RSS 100 -> 149 MiB (900 MiB with files) with a 1.5x limit: failures %q", f)
	}
	r.Config.MaxAnonRSS, r.AnonMax = 100<<20, 101<<20
	if f := r.Failures(); len(f) != 1 || !strings.Contains(f[0], "anonymous RSS reached 101.0 MiB") {
		t.Errorf("anonymous RSS peak 101 MiB with a 100 MiB cap: failures %q", f)
	}
}

func TestOnlyLocalAddresses(t *testing.T) {
	for addr, ok := range map[string]bool{
		"unix:/tmp/s.sock":   true,
		"127.0.0.1:7070":     true,
		"[::1]:7070":         true,
		"localhost:7070":     true,
		"10.1.2.3:7070":      false,
		"example.com:7070":   false,
		"0.0.0.0:7070":       false,
		"":                   false,
		"unix:":              false,
		"tcp://127.0.0.1:80": false,
	} {
		cfg := DefaultConfig()
		cfg.Addr = addr
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("--addr %q: Validate() = %v, want ok=%v", addr, err, ok)
		}
	}
}
