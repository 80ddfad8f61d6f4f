package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

const mib = 1 << 20

// Bench is one run of the benchmark: its settings, the directory it works
// in, and what it has measured so far.
type Bench struct {
	cfg     Config
	tmp     string // removed at the end
	rng     *rand.Rand
	tables  []*Table
	summary Summary
	log     func(format string, args ...any)
	dirs    int
}

// dir returns a new empty directory under the run's temporary directory.
func (b *Bench) dir() (string, error) {
	b.dirs++
	d := filepath.Join(b.tmp, strconv.Itoa(b.dirs))
	return d, os.Mkdir(d, 0o700)
}

// startDaemon starts savepointd on a new empty data directory.
func (b *Bench) startDaemon(ctx context.Context) (*Daemon, error) {
	d, err := b.dir()
	if err != nil {
		return nil, err
	}
	return StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(d, "data"), d)
}

// pointA is the save of a model reply that names one tool call, and pointB
// the save of that call's result, each one message of MessageBytes.
func (b *Bench) pointA(i int) *Save {
	return newSave([]*savepointv1.Message{textMessage(b.rng, "assistant", b.cfg.MessageBytes)},
		[]*savepointv1.ToolUse{{
			ToolUseId: fmt.Sprintf("toolu_%d", i), Name: "send_email", InputJson: fmt.Sprintf(`{"n":%d}`, i),
			EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		}})
}

func (b *Bench) pointB() *Save {
	return newSave([]*savepointv1.Message{textMessage(b.rng, "user", b.cfg.MessageBytes)}, nil)
}

// ---------------------------------------------------------------------------
// Scenario 1: save latency, one session

// SaveLatency times the SaveCheckpoint calls of Point A + Point B cycles in
// one session against the same bytes written durably by each baseline.
func (b *Bench) SaveLatency(ctx context.Context, spd Target) error {
	targets := append([]Target{spd}, latencyBaselines()...)
	n := b.cfg.Cycles
	saves := make([]*Save, 0, 2*(n+warmCycles))
	for i := range n + warmCycles {
		saves = append(saves, b.pointA(i), b.pointB())
	}
	p50 := map[string][]float64{}
	p99 := map[string][]float64{}
	for rep := range b.cfg.Reps {
		for _, t := range targets {
			lat, err := b.timeSaves(ctx, t, saves)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			p50[t.Name()] = append(p50[t.Name()], ms(Percentile(lat, 50)))
			p99[t.Name()] = append(p99[t.Name()], ms(Percentile(lat, 99)))
		}
		b.log("scenario 1: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	floor, bdg := p50[fsyncTarget{}.Name()], p50[badgerTarget{}.Name()]
	t := &Table{
		Title:  "1. Save latency, one session (Point A + Point B cycles)",
		Header: []string{"system", "p50 ms", "p99 ms", "p50 / write+fdatasync", "p50 / badger txn"},
		Notes: []string{
			fmt.Sprintf("%d saves (%d cycles) per system per repetition after %d warm-up cycles; %d repetitions, systems interleaved; each figure the median over repetitions, each ratio the median of the per-repetition ratios.",
				2*n, n, warmCycles, b.cfg.Reps),
			fmt.Sprintf("Each save appends one %d-byte message (Point A also leaves one tool use pending); the baselines write the %d-byte encoded SaveCheckpointRequest.", b.cfg.MessageBytes, len(saves[0].Bytes)),
		},
	}
	for _, tg := range targets {
		name := tg.Name()
		t.Add(name, Median(p50[name]), Median(p99[name]), MedianRatio(p50[name], floor), MedianRatio(p50[name], bdg))
	}
	b.tables = append(b.tables, t)
	b.summary["save_p50_vs_fsync"] = MedianRatio(p50[spd.Name()], floor)
	b.summary["save_p50_vs_badger"] = MedianRatio(p50[spd.Name()], bdg)
	return nil
}

const warmCycles = 10

// timeSaves opens t, saves each of saves in one session, and returns the
// latency of each save after the warm-up cycles.
func (b *Bench) timeSaves(ctx context.Context, t Target, saves []*Save) (lat []time.Duration, err error) {
	dir, err := b.dir()
	if err != nil {
		return nil, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	w, err := st.Session(ctx, 0)
	if err != nil {
		return nil, err
	}
	for i, s := range saves {
		t0 := time.Now()
		if err := w.Save(ctx, s); err != nil {
			return nil, err
		}
		if i >= 2*warmCycles {
			lat = append(lat, time.Since(t0))
		}
	}
	return lat, nil
}

// ---------------------------------------------------------------------------
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
	var cpuPerSave []float64
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
				if watch != nil {
					p := peak[n]
					peak[n] = Memory{RSS: max(p.RSS, r.peak.RSS), Anon: max(p.Anon, r.peak.Anon), File: max(p.File, r.peak.File)}
					if n == 64 {
						cpuPerSave = append(cpuPerSave, r.cpuPerSave)
					}
				}
			}
		}
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
		Title:  "6. savepointd CPU per save, 64 sessions",
		Header: []string{"CPU µs per SaveCheckpoint (median)", "min", "max"},
		Notes:  []string{"utime + stime of savepointd from /proc/PID/stat (10 ms ticks) over each scenario-2 window at 64 sessions, over the saves it completed in that window."},
	}
	if len(cpuPerSave) > 0 {
		c.Add(Median(cpuPerSave), slices.Min(cpuPerSave), slices.Max(cpuPerSave))
	}
	b.tables = append(b.tables, c)
	b.summary["cpu_us_per_save"] = Median(cpuPerSave)
	return nil
}

type loopResult struct {
	rate       float64 // saves per second in the window
	peak       Memory  // of the watched process, over warm-up and window
	cpuPerSave float64 // µs of the watched process's CPU per save in the window
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
	var cpu0, cpu1 time.Duration
	if watch != nil {
		if cpu0, err = watch.CPU(); err != nil {
			close(stop)
			wg.Wait()
			sampled.Wait()
			return res, err
		}
	}
	c0, t0 := done.Load(), time.Now()
	time.Sleep(b.cfg.Window)
	c1, elapsed := done.Load(), time.Since(t0)
	if watch != nil {
		cpu1, err = watch.CPU()
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
	res.cpuPerSave = float64((cpu1 - cpu0).Microseconds()) / float64(saves)
	return res, nil
}

// ---------------------------------------------------------------------------
// Scenario 3: history growth

// HistoryGrowth runs an agent of Turns saves, each appending one message,
// and compares save latency and bytes written per save around turn 10 and
// at the last turns, for savepointd and a store that rewrites the whole
// history on every save.
func (b *Bench) HistoryGrowth(ctx context.Context, spd *savepointdTarget) error {
	turns := b.cfg.Turns
	history := make([]*Save, turns)
	for i := range history {
		role := "assistant"
		if i%2 == 1 {
			role = "user"
		}
		history[i] = newSave([]*savepointv1.Message{textMessage(b.rng, role, b.cfg.MessageBytes)}, nil)
	}
	// The windows: turns 6..15 ("turn 10") and the last ten turns.
	early, late := window{5, 15}, window{turns - 10, turns}
	rewrite := jsonTarget{whole: true}
	type figs struct{ early, late, earlyBytes, lateBytes []float64 }
	got := map[string]*figs{spd.Name(): {}, rewrite.Name(): {}}
	for rep := range b.cfg.Reps {
		for _, t := range []Target{spd, rewrite} {
			var e, l windowResult
			var err error
			if t == spd {
				e, l, err = b.growSavepointd(ctx, spd, history, early, late)
			} else {
				e, l, err = b.growRewrite(ctx, rewrite, history, early, late)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			f := got[t.Name()]
			f.early, f.late = append(f.early, e.p50ms), append(f.late, l.p50ms)
			f.earlyBytes, f.lateBytes = append(f.earlyBytes, e.bytesPerSave), append(f.lateBytes, l.bytesPerSave)
		}
		b.log("scenario 3: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	t := &Table{
		Title: fmt.Sprintf("3. History growth: an agent of %d turns, one %d-byte message per turn", turns, b.cfg.MessageBytes),
		Header: []string{"system", "p50 ms at turn 10", fmt.Sprintf("p50 ms at turn %d", turns), fmt.Sprintf("turn %d / turn 10", turns),
			"KiB written per save at 10", fmt.Sprintf("KiB written per save at %d", turns)},
		Notes: []string{
			fmt.Sprintf("Turn 10: the saves of turns 6-15; turn %d: turns %d-%d. Medians over %d repetitions, each a new session.", turns, late.from+1, late.to, b.cfg.Reps),
			"Bytes written: write_bytes of /proc/PID/io over the window (page-cache bytes dirtied, in whole 4 KiB pages), per save; savepointd's own, and this process's for the rewrite store.",
			fmt.Sprintf("savepointd saves every turn through the socket; the rewrite store saves turns 1-15, then is given the history of turn %d without writing it and saves the last ten turns.", late.from),
		},
	}
	for _, name := range []string{spd.Name(), rewrite.Name()} {
		f := got[name]
		t.Add(name, Median(f.early), Median(f.late), MedianRatio(f.late, f.early), Median(f.earlyBytes)/1024, Median(f.lateBytes)/1024)
	}
	b.tables = append(b.tables, t)
	b.summary["growth_2000_vs_10"] = MedianRatio(got[spd.Name()].late, got[spd.Name()].early)
	return nil
}

// window is the turns from+1 .. to (history[from:to]).
type window struct{ from, to int }

type windowResult struct{ p50ms, bytesPerSave float64 }

// measure saves history[w.from:w.to] through wr and returns their median
// latency and the write_bytes of p per save.
func measure(ctx context.Context, wr Writer, history []*Save, w window, p Proc) (windowResult, error) {
	wb0, err := p.WriteBytes()
	if err != nil {
		return windowResult{}, err
	}
	var lat []time.Duration
	for _, s := range history[w.from:w.to] {
		t0 := time.Now()
		if err := wr.Save(ctx, s); err != nil {
			return windowResult{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	wb1, err := p.WriteBytes()
	if err != nil {
		return windowResult{}, err
	}
	return windowResult{p50ms: ms(Percentile(lat, 50)), bytesPerSave: float64(wb1-wb0) / float64(w.to-w.from)}, nil
}

func (b *Bench) growSavepointd(ctx context.Context, spd *savepointdTarget, history []*Save, early, late window) (e, l windowResult, err error) {
	st, err := spd.Open(ctx, "")
	if err != nil {
		return e, l, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	w, err := st.Session(ctx, 0)
	if err != nil {
		return e, l, err
	}
	plain := func(from, to int) error {
		for _, s := range history[from:to] {
			if err := w.Save(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := plain(0, early.from); err != nil {
		return e, l, err
	}
	if e, err = measure(ctx, w, history, early, spd.d.Proc); err != nil {
		return e, l, err
	}
	if err := plain(early.to, late.from); err != nil {
		return e, l, err
	}
	l, err = measure(ctx, w, history, late, spd.d.Proc)
	return e, l, err
}

func (b *Bench) growRewrite(ctx context.Context, t jsonTarget, history []*Save, early, late window) (e, l windowResult, err error) {
	dir, err := b.dir()
	if err != nil {
		return e, l, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return e, l, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	wr, err := st.Session(ctx, 0)
	if err != nil {
		return e, l, err
	}
	w := wr.(*jsonWriter)
	for _, s := range history[:early.from] {
		if err := w.Save(ctx, s); err != nil {
			return e, l, err
		}
	}
	if e, err = measure(ctx, w, history, early, Proc{}); err != nil {
		return e, l, err
	}
	for _, s := range history[early.to:late.from] {
		w.prefill(s.Messages)
	}
	l, err = measure(ctx, w, history, late, Proc{})
	return e, l, err
}

// ---------------------------------------------------------------------------
// Scenario 4: resume

// Resume builds a session of ResumeMessages messages and times the Go
// client's Resume, which pages through ListMessages to the end.
func (b *Bench) Resume(ctx context.Context, d *Daemon) error {
	conn, err := d.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	raw := savepointv1.NewSavepointServiceClient(conn)
	const sid = "bench-resume"
	var rev, epoch uint64
	var bytes int64
	for done := 0; done < b.cfg.ResumeMessages || rev == 0; {
		k := min(1000, b.cfg.ResumeMessages-done)
		msgs := make([]*savepointv1.Message, k)
		for i := range msgs {
			msgs[i] = textMessage(b.rng, []string{"assistant", "user"}[(done+i)%2], b.cfg.MessageBytes)
			bytes += int64(len(msgs[i].GetRole()) + len(msgs[i].GetContentJson()))
		}
		resp, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
			SessionId: sid, ExpectedRevision: rev, Epoch: epoch, RequestId: uuid.NewString(), Task: benchTask, AppendMessages: msgs,
		})
		if err != nil {
			return fmt.Errorf("building the session to resume: %w", err)
		}
		rev, epoch, done = resp.GetRevision(), resp.GetEpoch(), done+k
	}
	c, err := client.Dial(ctx, "unix:"+d.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var took []float64
	for range max(b.cfg.Reps, 3) {
		t0 := time.Now()
		s, err := c.Resume(ctx, sid)
		if err != nil {
			return err
		}
		el := time.Since(t0)
		if got := len(s.Messages()); got != b.cfg.ResumeMessages {
			return fmt.Errorf("resumed %d messages, want %d", got, b.cfg.ResumeMessages)
		}
		took = append(took, ms(el))
	}
	med := Median(took)
	t := &Table{
		Title:  fmt.Sprintf("4. Resume: a session of %d messages (%.1f MiB of content)", b.cfg.ResumeMessages, float64(bytes)/mib),
		Header: []string{"Resume + paging to the end, ms (median)", "min ms", "max ms", "MB/s"},
		Notes:  []string{fmt.Sprintf("The Go client's Resume (one Resume RPC, which takes ownership durably, then ListMessages pages of at most the 3 MiB response budget), %d times; MB/s is content bytes (role + content_json) over the median time.", len(took))},
	}
	t.Add(med, slices.Min(took), slices.Max(took), float64(bytes)/1e6/(med/1000))
	b.tables = append(b.tables, t)
	b.summary["resume_20mib_ms"] = med
	return nil
}

// ---------------------------------------------------------------------------
// Scenario 5: start with many sessions

// Startup times savepointd from exec to SERVING on a copy of a store of
// StartSessions sessions, built once and kept in the cache directory.
func (b *Bench) Startup(ctx context.Context) error {
	fixture, err := b.fixture(ctx)
	if err != nil {
		return fmt.Errorf("building the %d-session store: %w", b.cfg.StartSessions, err)
	}
	d, err := b.dir()
	if err != nil {
		return err
	}
	data := filepath.Join(d, "data")
	if err := os.CopyFS(data, os.DirFS(fixture)); err != nil {
		return fmt.Errorf("copying the fixture: %w", err)
	}
	size, err := dirSize(data)
	if err != nil {
		return err
	}
	var took []float64
	for range max(b.cfg.Reps, 3) {
		dm, err := StartDaemon(ctx, b.cfg.Savepointd, data, d)
		if err != nil {
			return err
		}
		took = append(took, ms(dm.Started))
		err = checkFixture(ctx, dm, b.cfg.StartSessions)
		if err := errors.Join(err, dm.Stop()); err != nil {
			return err
		}
	}
	t := &Table{
		Title:  fmt.Sprintf("5b. savepointd start to serving, %d sessions stored (%.0f MiB on disk)", b.cfg.StartSessions, float64(size)/mib),
		Header: []string{"ms (median)", "min ms", "max ms"},
		Notes: []string{fmt.Sprintf("From exec to the first health check answering SERVING (polled every 1 ms), %d starts on one copy of the cached store (page cache warm), each stopped with SIGTERM; each session holds one %d-byte message.",
			len(took), b.cfg.MessageBytes)},
	}
	t.Add(Median(took), slices.Min(took), slices.Max(took))
	b.tables = append(b.tables, t)
	b.summary["startup_100k_ms"] = Median(took)
	return nil
}

func fixtureSessionID(i int) string { return fmt.Sprintf("fixture-%06d", i) }

// checkFixture confirms the daemon serves the store's last session.
func checkFixture(ctx context.Context, d *Daemon, n int) error {
	conn, err := d.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = savepointv1.NewSavepointServiceClient(conn).GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: fixtureSessionID(n - 1)})
	if err != nil {
		return fmt.Errorf("the started daemon does not serve the fixture's last session: %w", err)
	}
	return nil
}

// fixture returns the cached store of StartSessions sessions, building it
// through savepointd when it is missing. The cache is keyed by the store's
// format version and the session count; a build that did not finish is
// never used.
func (b *Bench) fixture(ctx context.Context) (string, error) {
	dir := filepath.Join(b.cfg.CacheDir, fmt.Sprintf("sessions-%d-%db-format%d", b.cfg.StartSessions, b.cfg.MessageBytes, badgerstore.FormatVersion))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return filepath.Join(dir, "data"), nil
	}
	b.log("scenario 5: building the %d-session store in %s (once; later runs reuse it)", b.cfg.StartSessions, dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	sock, err := b.dir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	d, err := StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(dir, "data"), sock)
	if err != nil {
		return "", err
	}
	const workers = 64
	next := atomic.Int64{}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), b.rng.Uint64()))
		wg.Go(func() {
			conn, err := d.Dial()
			if err != nil {
				errs[w] = err
				return
			}
			defer conn.Close()
			c := savepointv1.NewSavepointServiceClient(conn)
			for {
				i := int(next.Add(1)) - 1
				if i >= b.cfg.StartSessions || ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
					SessionId: fixtureSessionID(i), RequestId: uuid.NewString(), Task: benchTask,
					AppendMessages: []*savepointv1.Message{textMessage(rng, "user", b.cfg.MessageBytes)},
				}); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, d.Stop())...); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o600); err != nil {
		return "", err
	}
	return filepath.Join(dir, "data"), nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
