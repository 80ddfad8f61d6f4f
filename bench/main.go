// Command savepoint-bench measures savepointd against the stores it
// replaces, as issue 9 sets out: save latency at one session against the
// disk's floor and embedded stores, throughput at 1 to 256 sessions, save
// cost as a history grows, resume of a long session, memory, start-up with
// 100,000 sessions stored, and CPU per save. savepointd is the real binary,
// started on a Unix socket in a temporary directory; the baselines run in
// this process.
//
// It prints the machine, one Markdown table per scenario, and closing
// name=value lines (Summary). Every figure is a median over repetitions and
// every comparison a ratio of figures from the same run. It exits 1 when a
// scenario fails or a closing figure could not be measured, 2 on bad flags.
// -quick runs the short form (under 3 minutes once its cached store of
// 100,000 sessions exists under -cache).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Config is one benchmark run.
type Config struct {
	Savepointd     string        // the savepointd binary
	Savepoint      string        // the savepoint CLI, for scenario 5c (savepoint ui); "" skips it (make bench passes bin/savepoint)
	CacheDir       string        // where built fixtures are kept between runs
	TempDir        string        // where data directories and sockets go; "" is $TMPDIR
	Reps           int           // repetitions of every measurement
	MessageBytes   int           // content_json bytes of every message
	Cycles         int           // scenario 1: Point A + Point B cycles per repetition
	Sessions       []int         // scenario 2: session counts; the first is the base of speedups
	Warmup, Window time.Duration // scenario 2: not counted, then counted
	Turns          int           // scenario 3: the agent's turns
	ResumeMessages int           // scenario 4: the session's messages
	StartSessions  int           // scenario 5: sessions in the start-up store
	StartBytes     int64         // scenario 5: message bytes in it, in all (at least one message per session)
	Scenarios      []int         // which scenarios to run (1-6); all by default
	// Postgres runs the PostgreSQL rows (postgres.go); false skips them.
	Postgres bool
	// The LangGraph savers' benchmark (langgraph.go): both empty skip it.
	LangGraphPython, LangGraphScript string
	// Checkpointers runs the checkpointer comparison (checkpointers.go)
	// in place of the scenarios; CheckpointersScript is its Python side
	// (client/python/bench/checkpointers.py, run by LangGraphPython), and
	// PlotDir, when set, where it draws its PNGs.
	Checkpointers                bool
	CheckpointersScript, PlotDir string
}

// DefaultConfig is the full run, QuickConfig the -quick one.
func DefaultConfig() Config {
	return Config{
		Savepointd: "bin/savepointd", CacheDir: "bin/benchcache",
		Reps: 5, MessageBytes: 2048, Cycles: 500,
		Sessions: []int{1, 8, 64, 256}, Warmup: time.Second, Window: 5 * time.Second,
		Turns: 2000, ResumeMessages: 10000, StartSessions: 100000, StartBytes: 1 << 30,
		Scenarios: []int{1, 2, 3, 4, 5, 6}, Postgres: true,
	}
}

// QuickConfig is DefaultConfig with fewer repetitions and shorter windows.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Reps, c.Cycles, c.Warmup, c.Window = 3, 150, 300*time.Millisecond, 1500*time.Millisecond
	return c
}

// CheckpointersConfig is the -checkpointers run without -quick: fewer
// repetitions and shorter windows than the full run, so that it fits in
// ten minutes on a 2-core machine.
func CheckpointersConfig() Config {
	c := DefaultConfig()
	c.Checkpointers = true
	c.Reps, c.Cycles, c.Warmup, c.Window = 3, 250, time.Second, 3*time.Second
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if c.Reps < 1 {
		bad("-reps %d: need at least 1", c.Reps)
	}
	if err := c.validateLangGraph(); err != nil {
		errs = append(errs, err)
	}
	if c.MessageBytes < 64 || c.MessageBytes > 1<<20 {
		bad("message bytes %d: need 64 to 1 MiB", c.MessageBytes)
	}
	if c.StartBytes < 0 {
		bad("-start-bytes %d: must not be negative", c.StartBytes)
	}
	if c.Cycles < 1 || c.Turns < 30 || c.ResumeMessages < 1 || c.StartSessions < 1 {
		bad("cycles, turns (>= 30), resume messages and start sessions must be positive")
	}
	if len(c.Sessions) == 0 || !slices.Contains(c.Sessions, 1) || !slices.Contains(c.Sessions, 64) || slices.ContainsFunc(c.Sessions, func(n int) bool { return n < 1 }) {
		bad("-sessions %v: need positive counts including 1 and 64", c.Sessions)
	}
	if c.Window <= 0 || c.Warmup < 0 {
		bad("-window %v, -warmup %v: need a positive window", c.Window, c.Warmup)
	}
	for _, s := range c.Scenarios {
		if s < 1 || s > 6 {
			bad("-scenarios: no scenario %d (1-6)", s)
		}
	}
	if _, err := os.Stat(c.Savepointd); err != nil {
		bad("-savepointd: %v (make bench builds it into ./bin)", err)
	}
	if c.Savepoint != "" {
		if _, err := os.Stat(c.Savepoint); err != nil {
			bad("-savepoint: %v (make bench builds it into ./bin)", err)
		}
	}
	return errors.Join(errs...)
}

func (c Config) runs(s int) bool { return slices.Contains(c.Scenarios, s) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "savepoint-bench: %v\n", err)
		return 2
	}
	if err := Run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "savepoint-bench: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	// -quick picks the defaults the other flags then change, so it is
	// looked for before parsing.
	cfg := DefaultConfig()
	if slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		return a == "quick" || a == "quick=true" || a == "quick=1"
	}) {
		cfg = QuickConfig()
	} else if slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		return a == "checkpointers" || a == "checkpointers=true" || a == "checkpointers=1"
	}) {
		cfg = CheckpointersConfig()
	}
	fs := flag.NewFlagSet("savepoint-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("quick", false, "the short run: fewer repetitions, shorter windows (set before the others)")
	fs.StringVar(&cfg.Savepointd, "savepointd", cfg.Savepointd, "the savepointd `binary` to measure")
	fs.StringVar(&cfg.Savepoint, "savepoint", cfg.Savepoint, "the savepoint CLI `binary` whose web inspector scenario 5c measures (make bench passes bin/savepoint); empty skips it")
	fs.StringVar(&cfg.CacheDir, "cache", cfg.CacheDir, "`directory` keeping built fixtures between runs")
	fs.StringVar(&cfg.TempDir, "tmp", cfg.TempDir, "`directory` for data directories and sockets (default $TMPDIR); keep it short and on the disk to measure")
	fs.IntVar(&cfg.Reps, "reps", cfg.Reps, "repetitions of every measurement")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "scenario 2: how long each throughput point is counted")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "scenario 2: how long each throughput point runs before counting")
	fs.Func("sessions", "scenario 2: comma-separated session `counts` (must include 64)", func(s string) error {
		ns, err := parseInts(s)
		cfg.Sessions = ns
		return err
	})
	fs.Func("scenarios", "comma-separated `scenarios` to run, 1-6 (default all; 5 and 6 need 2 for their memory and CPU)", func(s string) error {
		ns, err := parseInts(s)
		cfg.Scenarios = ns
		return err
	})
	fs.Int64Var(&cfg.StartBytes, "start-bytes", cfg.StartBytes, "scenario 5: message bytes of the start-up store in all, spread over its sessions")
	fs.BoolVar(&cfg.Postgres, "postgres", cfg.Postgres, "run the PostgreSQL rows (with scenario 1 or 2): savepointd --store-url against plain SQL inserts, on a server pgtest starts with fsync on; also the LangGraph savers' comparison with PostgresSaver and the -checkpointers PostgreSQL rows")
	langGraphFlags(fs, &cfg)
	fs.BoolVar(&cfg.Checkpointers, "checkpointers", cfg.Checkpointers, "run the checkpointer comparison (one table: savepointd on Badger and PostgreSQL, SQLite, LangGraph's savers, the seed's JSON file) instead of the scenarios")
	fs.StringVar(&cfg.CheckpointersScript, "checkpointers-script", cfg.CheckpointersScript, "-checkpointers: the `script` holding LangGraph's savers (client/python/bench/checkpointers.py), run by -langgraph-python; empty leaves their rows out")
	fs.StringVar(&cfg.PlotDir, "plots", cfg.PlotDir, "-checkpointers: the `directory` to draw the latency CDF and throughput PNGs into")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cfg.Validate()
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Run runs cfg's scenarios, writing the machine, the tables and, when every
// scenario ran, the closing name=value lines to out and progress to logw.
func Run(ctx context.Context, cfg Config, out, logw io.Writer) (err error) {
	tmp, err := os.MkdirTemp(cfg.TempDir, "spbench")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	start := time.Now()
	b := &Bench{
		cfg: cfg, tmp: tmp, rng: rand.New(rand.NewPCG(1, uint64(start.UnixNano()))), summary: Summary{},
		log: func(f string, a ...any) {
			fmt.Fprintf(logw, "savepoint-bench: %5.1fs: %s\n", time.Since(start).Seconds(), fmt.Sprintf(f, a...))
		},
	}
	mode := "full"
	if cfg.Reps == QuickConfig().Reps && cfg.Window == QuickConfig().Window {
		mode = "quick"
	}
	fmt.Fprintf(out, "## savepoint-bench (%s run, %s)\n\n", mode, start.UTC().Format(time.RFC3339))
	machine(tmp).Print(out)

	// Wherever a scenario fails, the tables measured so far are printed.
	defer func() {
		for _, t := range b.tables {
			t.Print(out)
		}
		fmt.Fprintf(out, "\nload average at the end: %s\n", loadavg())
		fmt.Fprintf(out, "took %.0fs\n\n", time.Since(start).Seconds())
		if err == nil && len(cfg.Scenarios) == 6 && !cfg.Checkpointers {
			err = b.summary.Write(out)
		}
	}()

	if cfg.Checkpointers {
		if err := b.Checkpointers(ctx); err != nil {
			return fmt.Errorf("checkpointers: %w", err)
		}
		b.log("checkpointers done")
		return nil
	}
	if cfg.runs(1) || cfg.runs(3) || cfg.runs(4) {
		d, err := b.startDaemon(ctx)
		if err != nil {
			return err
		}
		spd := &savepointdTarget{d: d, prefix: "lat"}
		err = func() error {
			if cfg.runs(1) {
				if err := b.SaveLatency(ctx, spd, emptyRPCTarget{d: d}, sequenceTarget{d: d}); err != nil {
					return fmt.Errorf("scenario 1: %w", err)
				}
			}
			if cfg.runs(3) {
				if err := b.HistoryGrowth(ctx, d); err != nil {
					return fmt.Errorf("scenario 3: %w", err)
				}
			}
			if cfg.runs(4) {
				if err := b.Resume(ctx, d); err != nil {
					return fmt.Errorf("scenario 4: %w", err)
				}
			}
			return nil
		}()
		if err := errors.Join(err, d.Stop()); err != nil {
			return err
		}
		b.log("scenarios 1, 3, 4 done")
	}
	if cfg.runs(2) || cfg.runs(6) {
		if err := b.Throughput(ctx); err != nil {
			return fmt.Errorf("scenario 2: %w", err)
		}
		b.log("scenarios 2, 5a, 6 done")
	}
	if cfg.runs(5) {
		if err := b.Startup(ctx); err != nil {
			return fmt.Errorf("scenario 5: %w", err)
		}
		b.log("scenario 5b done")
	}
	if cfg.Postgres && (cfg.runs(1) || cfg.runs(2)) {
		if err := b.Postgres(ctx); err != nil {
			return fmt.Errorf("PostgreSQL rows: %w", err)
		}
		b.log("PostgreSQL rows done")
	}
	if cfg.LangGraphPython != "" && cfg.LangGraphScript != "" {
		if err := b.LangGraph(ctx, mode == "quick"); err != nil {
			return fmt.Errorf("LangGraph savers: %w", err)
		}
		b.log("LangGraph savers done")
	}
	return nil
}
