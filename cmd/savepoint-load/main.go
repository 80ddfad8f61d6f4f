// Command savepoint-load puts savepointd under the load of many agent loops
// at once and reports what it saw: latency percentiles per RPC, throughput,
// errors by gRPC code and reason, and savepointd's resident memory.
//
// Each session loops like an agent with one side-effecting tool call per
// turn: Point A saves the assistant's message(s) with one pending tool use,
// BeginEffect marks it dispatched, RecordEffect writes its outcome, and
// Point B saves the tool result(s) with nothing pending. All sessions share
// one gRPC connection.
//
// It stops by itself after --duration or --max-saves, and exits 1 when any
// RPC failed (other than the reasons given to --allow-reasons) or when
// savepointd's anonymous RSS at the end is more than --max-rss-growth times
// its anonymous RSS at the end of the warm-up (the first tenth of the run),
// or above --max-anon-rss-mib. File-backed RSS (Badger's mapped tables and
// logs, which the kernel reclaims under pressure) is reported, not judged.
// It also reports savepointd's CPU time per durable RPC and per save. Only Unix sockets and
// loopback addresses are accepted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is savepoint-load with its arguments; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "savepoint-load: %v\n", err)
		return 2
	}
	res, err := Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "savepoint-load: %v\n", err)
		return 1
	}
	if fails := res.Failures(); len(fails) > 0 {
		for _, f := range fails {
			fmt.Fprintf(stdout, "FAIL: %s\n", f)
		}
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("savepoint-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "savepointd's `address`: unix:PATH or a loopback HOST:PORT (default $SAVEPOINT_ADDR)")
	fs.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "concurrent agent `sessions`")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "stop after this long")
	fs.Int64Var(&cfg.MaxSaves, "max-saves", cfg.MaxSaves, "stop after this many saves in all (0: no limit)")
	fs.IntVar(&cfg.History, "history", cfg.History, "`messages` appended per save")
	fs.IntVar(&cfg.MessageBytes, "message-bytes", cfg.MessageBytes, "`bytes` of content_json per message (and of each tool output)")
	fs.IntVar(&cfg.PID, "pid", cfg.PID, "savepointd's `pid`, to sample its RSS every second (0: the Unix socket's peer, if any)")
	fs.Float64Var(&cfg.MaxRSSGrowth, "max-rss-growth", cfg.MaxRSSGrowth, "fail when anonymous RSS at the end exceeds anonymous RSS at the end of the warm-up by this `ratio` (0: do not check)")
	fs.Func("max-anon-rss-mib", "fail when savepointd's anonymous RSS (RssAnon) is ever sampled above this many `MiB` (0: do not check; default 100)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		cfg.MaxAnonRSS = n << 20
		return nil
	})
	fs.DurationVar(&cfg.RPCTimeout, "rpc-timeout", cfg.RPCTimeout, "deadline of each RPC")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long to wait for savepointd to serve before starting")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "after the load, wait this long and report RSS again (0: do not)")
	fs.Func("allow-reasons", "comma-separated ErrorInfo `reasons` (or gRPC codes) counted but not failed", func(s string) error {
		cfg.AllowReasons = splitList(s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.Addr == "" {
		cfg.Addr = os.Getenv("SAVEPOINT_ADDR")
	}
	return cfg, cfg.Validate()
}

// DefaultConfig is the configuration the flags default to.
func DefaultConfig() Config {
	return Config{
		Sessions:     256,
		Duration:     60 * time.Second,
		History:      1,
		MessageBytes: 512,
		MaxAnonRSS:   100 << 20,
		RPCTimeout:   30 * time.Second,
		Wait:         10 * time.Second,
	}
}
