package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Scenario 2: throughput under concurrency, with scenario 5's peak memory and
// scenario 6's CPU

// Throughput runs Sessions concurrent save loops against savepointd (a fresh
// daemon, whose idle and peak memory and CPU it also reads) and the
// embedded baselines.
func (b *Bench) Throughput(ctx context.Context) (err error) {
	d, err := b.startDaemon(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Stop()) }()
	time.Sleep(time.Second) // let start-up work settle before reading idle memory
	idle, err := d.Proc.Memory()
	if err != nil {
		return err
	}
	idleRollup, err := d.Proc.Rollup()
	if err != nil {
		return err
	}

	spd := &savepointdTarget{d: d, prefix: "tp"}
	targets := append([]Target{spd}, throughputBaselines()...)
	pool := make([]*Save, 64)
	for i := range pool {
		pool[i] = newSave([]*savepointv1.Message{textMessage(b.rng, "assistant", b.cfg.MessageBytes)}, nil)
	}
	rate := map[string]map[int][]float64{}
	for _, t := range targets {
		rate[t.Name()] = map[int][]float64{}
	}
	peak := map[int]Memory{}
	empty, inproc := emptyRPCTarget{d: d}, storeTarget{}
	cpu64 := map[string]*cpuSamples{empty.Name(): {}, inproc.Name(): {}}
	for _, t := range targets {
		cpu64[t.Name()] = &cpuSamples{}
	}
	for rep := range b.cfg.Reps {
		for _, n := range b.cfg.Sessions {
			for _, t := range targets {
				var watch *Proc
				if t == spd {
					watch = &d.Proc
				}
				r, err := b.saveLoops(ctx, t, n, pool, watch)
				if err != nil {
					return fmt.Errorf("%s, %d sessions: %w", t.Name(), n, err)
				}
				rate[t.Name()][n] = append(rate[t.Name()][n], r.rate)
				if n == 64 {
					cpu64[t.Name()].add(r)
				}
				if watch != nil {
					p := peak[n]
					peak[n] = Memory{RSS: max(p.RSS, r.peak.RSS), Anon: max(p.Anon, r.peak.Anon), File: max(p.File, r.peak.File)}
				}
			}
		}
		// Scenario 6's floor: the same 64 loops calling an RPC that does
		// nothing, on the same daemon.
		r, err := b.saveLoops(ctx, empty, 64, pool, &d.Proc)
		if err != nil {
			return fmt.Errorf("%s, 64 sessions: %w", empty.Name(), err)
		}
		cpu64[empty.Name()].add(r)
		// And the store's share of it: savepointd's store in this process,
		// the same 64 loops with no transport.
		if r, err = b.saveLoops(ctx, inproc, 64, pool, nil); err != nil {
			return fmt.Errorf("%s, 64 sessions: %w", inproc.Name(), err)
		}
		cpu64[inproc.Name()].add(r)
		b.log("scenario 2: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	end, err := d.Proc.Memory()
	if err != nil {
		return err
	}
	endRollup, err := d.Proc.Rollup()
	if err != nil {
		return err
	}

	t := &Table{
		Title:  "2. Throughput under concurrency (durable saves per second)",
		Header: []string{"sessions"},
		Notes: []string{
			fmt.Sprintf("Each session a loop of saves appending one %d-byte message, no effects; %v counted after %v of warm-up, %d repetitions, systems and session counts interleaved; medians over repetitions.",
				b.cfg.MessageBytes, b.cfg.Window, b.cfg.Warmup, b.cfg.Reps),
			"savepointd: the load generator (this process, one gRPC connection per session) shares the machine's cores with the daemon. Speedup and ratios: medians of per-repetition ratios.",
		},
	}
	for _, tg := range targets {
		t.Header = append(t.Header, tg.Name()+" saves/s", "speedup")
	}
	sqliteName, badgerName := sqliteTarget{}.Name(), badgerTarget{}.Name()
	t.Header = append(t.Header, "savepointd / sqlite", "savepointd / badger")
	one := b.cfg.Sessions[0]
	for _, n := range b.cfg.Sessions {
		row := []any{n}
		for _, tg := range targets {
			r := rate[tg.Name()]
			row = append(row, Median(r[n]), MedianRatio(r[n], r[one]))
		}
		s := rate[spd.Name()][n]
		row = append(row, MedianRatio(s, rate[sqliteName][n]), MedianRatio(s, rate[badgerName][n]))
		t.Add(row...)
	}
	b.tables = append(b.tables, t)
	s := rate[spd.Name()]
	b.summary["throughput64_vs_1"] = MedianRatio(s[64], s[one])
	b.summary["throughput64_vs_sqlite"] = MedianRatio(s[64], rate[sqliteName][64])
	b.summary["throughput64_vs_badger"] = MedianRatio(s[64], rate[badgerName][64])
	b.summary["throughput1_vs_sqlite"] = MedianRatio(s[1], rate[sqliteName][1])

	// Scenario 5, memory.
	m := &Table{
		Title:  "5a. savepointd memory (MiB)",
		Header: []string{"when", "RSS", "anonymous", "file-backed"},
		Notes: []string{
			"Idle: 1 s after the daemon first answered SERVING, on an empty data directory. Peaks: the largest of /proc/PID/status samples taken every 100 ms while that many sessions ran (RssAnon and RssFile peak separately).",
			"One daemon serves all of scenario 2 with its default settings, so a point's peak includes what the points before it left (the first repetition's 256 sessions come before the second's 1).",
			"End: after every repetition of scenario 2, from /proc/PID/smaps_rollup (Anonymous; file-backed = Rss - Anonymous: Badger's mapped tables and logs).",
		},
	}
	m.Add("idle (status)", float64(idle.RSS)/mib, float64(idle.Anon)/mib, float64(idle.File)/mib)
	m.Add("idle (smaps_rollup)", float64(idleRollup.RSS)/mib, float64(idleRollup.Anonymous)/mib, float64(idleRollup.FileBacked())/mib)
	var peakAnon int64
	for _, n := range b.cfg.Sessions {
		p := peak[n]
		m.Add(fmt.Sprintf("peak, %d sessions", n), float64(p.RSS)/mib, float64(p.Anon)/mib, float64(p.File)/mib)
		peakAnon = max(peakAnon, p.Anon)
	}
	m.Add("end (smaps_rollup)", float64(endRollup.RSS)/mib, float64(endRollup.Anonymous)/mib, float64(endRollup.FileBacked())/mib)
	m.Add("VmHWM at end", float64(end.HWM)/mib, "", "")
	b.tables = append(b.tables, m)
	b.summary["rss_idle_mib"] = float64(idle.RSS) / mib
	b.summary["rss_peak_anon_mib"] = float64(peakAnon) / mib

	// Scenario 6.
	c := &Table{
		Title:  "6. CPU per save, 64 sessions",
		Header: []string{"system", "µs in savepointd", "µs in this process", "µs in all", "all: min", "all: max", "machine not idle"},
		Notes: []string{
			"utime + stime from /proc/PID/stat (10 ms ticks) over each scenario-2 window at 64 sessions, over the saves completed in that window; medians over repetitions. This process is the load generator for savepointd (64 gRPC clients) and the embedded store itself for the baselines.",
			"Empty RPC: the same 64 loops on the same daemon, each calling grpc.health.v1 Check instead of SaveCheckpoint (no store, no validation, no log line), once per repetition after the others: what gRPC's transport and the interceptors cost a call on each side.",
			"Store in process: the same 64 loops saving to savepointd's store (daemon/badgerstore) opened in this process, after the empty RPC: the store's own CPU per save, its sync and Badger's background work included. Floor: empty RPC (in savepointd) + store in process (in this process).",
			"Machine not idle: the share of all CPUs' time, from /proc/stat, that was neither idle nor iowait in the window (other processes and the hypervisor's steal included); near 100% the figures above are bound by the cores.",
		},
	}
	for _, tg := range append(targets, Target(empty), Target(inproc)) {
		cs := cpu64[tg.Name()]
		if len(cs.all) == 0 {
			continue
		}
		daemon := any("")
		if tg == spd || tg == empty {
			daemon = Median(cs.daemon)
		}
		c.Add(tg.Name(), daemon, Median(cs.self), Median(cs.all), slices.Min(cs.all), slices.Max(cs.all), fmt.Sprintf("%.0f%%", 100*Median(cs.busy)))
	}
	b.tables = append(b.tables, c)
	b.summary["cpu_us_per_save"] = Median(cpu64[spd.Name()].daemon)
	b.summary["cpu_save_vs_empty_rpc"] = MedianRatio(cpu64[spd.Name()].daemon, cpu64[empty.Name()].daemon)
	b.summary["cpu_save_vs_floor"] = MedianRatio(cpu64[spd.Name()].daemon, Sum(cpu64[empty.Name()].daemon, cpu64[inproc.Name()].self))
	return nil
}

// cpuSamples are one system's CPU figures per save over the repetitions.
type cpuSamples struct{ daemon, self, all, busy []float64 }

func (c *cpuSamples) add(r loopResult) {
	c.daemon = append(c.daemon, r.cpuPerSave)
	c.self = append(c.self, r.selfPerSave)
	c.all = append(c.all, r.cpuPerSave+r.selfPerSave)
	c.busy = append(c.busy, r.busy)
}

type loopResult struct {
	rate        float64 // saves per second in the window
	peak        Memory  // of the watched process, over warm-up and window
	cpuPerSave  float64 // µs of the watched process's CPU per save in the window
	selfPerSave float64 // µs of this process's CPU per save in the window
	busy        float64 // the share of the machine's CPU time not idle in the window
}

// saveLoops runs n sessions on a fresh store of t, each saving pool's saves
// in turn as fast as it can, and measures the saves completed in the
// window after the warm-up. watch, when set, is sampled for memory and CPU.
func (b *Bench) saveLoops(ctx context.Context, t Target, n int, pool []*Save, watch *Proc) (res loopResult, err error) {
	dir, err := b.dir()
	if err != nil {
		return res, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	writers := make([]Writer, n)
	for i := range writers {
		if writers[i], err = st.Session(ctx, i); err != nil {
			return res, err
		}
	}

	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, w := range writers {
		wg.Go(func() {
			for k := i; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.Save(ctx, pool[k%len(pool)]); err != nil {
					errs[i] = err
					return
				}
				done.Add(1)
			}
		})
	}
	var sampled sync.WaitGroup
	var sampleErr error
	if watch != nil {
		sampled.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				m, err := watch.Memory()
				if err != nil {
					sampleErr = err
					return
				}
				res.peak = Memory{RSS: max(res.peak.RSS, m.RSS), Anon: max(res.peak.Anon, m.Anon), File: max(res.peak.File, m.File)}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}

	time.Sleep(b.cfg.Warmup)
	c0, t0 := done.Load(), time.Now()
	cpu0, err := readCPU(watch)
	if err == nil {
		time.Sleep(b.cfg.Window)
	}
	c1, elapsed := done.Load(), time.Since(t0)
	var cpu1 cpuReading
	if err == nil {
		cpu1, err = readCPU(watch)
	}
	close(stop)
	wg.Wait()
	sampled.Wait()
	if err := errors.Join(append(errs, err, sampleErr)...); err != nil {
		return res, err
	}
	saves := c1 - c0
	if saves == 0 {
		return res, errors.New("no save completed in the window")
	}
	res.rate = float64(saves) / elapsed.Seconds()
	perSave := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(saves) }
	res.cpuPerSave = perSave(cpu1.watched - cpu0.watched)
	res.selfPerSave = perSave(cpu1.self - cpu0.self)
	res.busy = cpu1.machine.Busy(cpu0.machine)
	return res, nil
}

// cpuReading is the CPU time, at one moment, of the watched process (zero
// when there is none), of this process and of the whole machine.
type cpuReading struct {
	watched, self time.Duration
	machine       MachineCPU
}

func readCPU(watch *Proc) (r cpuReading, err error) {
	if watch != nil {
		if r.watched, err = watch.CPU(); err != nil {
			return r, err
		}
	}
	if r.self, err = (Proc{}).CPU(); err != nil {
		return r, err
	}
	r.machine, err = ReadMachineCPU()
	return r, err
}
