package crashtest

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/crashtest/faultfs"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// The short form runs in `go test ./tests/crashtest` (make test); make
// powerloss passes -powercut-cycles=$(CYCLES) for the long one.
var (
	flagPowerCycles  = flag.Int("powercut-cycles", 4, "power cuts of the power-cut harness (make powerloss: CYCLES)")
	flagPowerClients = flag.Int("powercut-clients", 8, "concurrent clients of the power-cut harness")
)

// TestPowerCut runs clients saving, beginning and recording effects against
// the real savepointd whose data directory is on faultfs, a FUSE file
// system that keeps only what was fsynced (files) and what a directory's
// fsync covered (entries). Each cycle cuts the power, at a random moment or
// at a random sync (which then fails, as a sync a power loss interrupts),
// kills savepointd, rebuilds the data directory from what was durable,
// restarts savepointd on it, and reads back every acknowledged write,
// checks the in-flight ones are whole or absent, and resumes every session;
// at the end savepointd verify must pass. Any lost, torn or unreadable
// write fails the test.
func TestPowerCut(t *testing.T) {
	cfg := crashConfig{cycles: *flagPowerCycles, clients: *flagPowerClients, seed: *flagSeed, maxLoad: *flagMaxLoad, big: true}
	rep := runPowerCut(t, binary(t, false), cfg)
	t.Logf("%d in doubt at a cut (%d had been applied before the retry), %d unexpected answers, %v",
		rep.inDoubt, rep.hadApplied, rep.unexpected, rep.elapsed.Round(time.Millisecond))
	fmt.Println("power cut: " + rep.line())
	if rep.lost+rep.torn+rep.unread > 0 || rep.unexpected > 0 || rep.acked == 0 || rep.refused > 0 {
		t.Fatalf("%s unexpected=%d", rep.line(), rep.unexpected)
	}
}

// TestPowerCutDetectsSkippedSync is the proof that the power-cut harness
// can fail: savepointd built with the nosync fault acknowledges
// commits it never synced (a kill -9 loses nothing of them, the page cache
// keeps them), and under power cuts the harness must report lost writes.
func TestPowerCutDetectsSkippedSync(t *testing.T) {
	bin := daemontest.BuildFaults(t, "nosync")
	cfg := crashConfig{cycles: 3, clients: 8, seed: *flagSeed, maxLoad: 500 * time.Millisecond, broken: true}
	rep := runPowerCut(t, bin, cfg)
	fmt.Printf("power cut, build without syncs (the nosync fault): %s\n", rep.line())
	if rep.lost == 0 {
		t.Fatalf("the power-cut harness did not detect the losses of the build that skips its syncs: %s", rep.line())
	}
}

// TestPowerCutDetectsSkippedDirSync is the second proof: savepointd built
// with the nodirsync fault does not sync the data directory after
// Badger creates a file (a value-log file, a memtable's log), so a power
// cut takes the file and the acknowledged writes in it, and the harness
// must say so: writes lost or unreadable, or a restart refused.
func TestPowerCutDetectsSkippedDirSync(t *testing.T) {
	bin := daemontest.BuildFaults(t, "nodirsync")
	cfg := crashConfig{cycles: 3, clients: 8, seed: *flagSeed, maxLoad: 500 * time.Millisecond, broken: true}
	rep := runPowerCut(t, bin, cfg)
	fmt.Printf("power cut, build without the directory sync (the nodirsync fault): %s\n", rep.line())
	if rep.lost+rep.torn+rep.unread+rep.refused == 0 {
		t.Fatalf("the power-cut harness did not detect the losses of the build that skips the directory sync: %s", rep.line())
	}
}

// TestPowerCutAtLogPoints cuts the power once at each of the places of
// the commit path that concern the write-ahead log (logPoints): right after
// a segment's sync made a record durable and before the commit reaches
// Badger or is acknowledged; during a checkpoint's sync of Badger; and
// during the write of the mark that follows it. No acknowledged write may
// be lost, torn or unreadable.
func TestPowerCutAtLogPoints(t *testing.T) {
	cfg := crashConfig{cycles: 2 * len(logPoints), clients: *flagPowerClients, seed: *flagSeed, maxLoad: *flagMaxLoad, big: true}
	rep := runPowerCutAt(t, binary(t, false), cfg, logPoints)
	fmt.Println("power cut at the log's points: " + rep.line())
	if rep.lost+rep.torn+rep.unread > 0 || rep.unexpected > 0 || rep.acked == 0 || rep.refused > 0 || rep.atPoint != cfg.cycles {
		t.Fatalf("%s unexpected=%d", rep.line(), rep.unexpected)
	}
}

// logPoints are the named power-cut points of the write-ahead log, each
// with how many of its syncs may pass before the cut (one of them at
// random): a segment's sync comes once per commit, Badger's and the
// mark's once per checkpoint (about a second).
var logPoints = []logPoint{
	{SyncPoint: faultfs.SyncPoint{Name: "after a log segment's sync, before the Badger apply", After: true,
		Match: func(n string) bool { return strings.HasSuffix(n, ".seg") }}, upTo: 100},
	{SyncPoint: faultfs.SyncPoint{Name: "during a checkpoint's sync of Badger",
		Match: func(n string) bool { return strings.HasSuffix(n, ".vlog") || strings.HasSuffix(n, ".mem") }}, upTo: 3},
	{SyncPoint: faultfs.SyncPoint{Name: "during the write of the mark after a checkpoint",
		Match: func(n string) bool { return n == "mark.tmp" }}, upTo: 2},
	// A memtable flush writes and syncs the new table, then adds it to the
	// MANIFEST and syncs that; the filler makes one come within the cycle.
	{SyncPoint: faultfs.SyncPoint{Name: "during a memtable flush, at the new table's sync",
		Match: func(n string) bool { return strings.HasSuffix(n, ".sst") }}, upTo: 1, fill: true},
	{SyncPoint: faultfs.SyncPoint{Name: "during a memtable flush, right after the MANIFEST's sync", After: true,
		Match: func(n string) bool { return n == "MANIFEST" }}, upTo: 1, fill: true},
}

// logPoint is a named point and how many of its syncs may pass before the
// cut (one of them at random); fill writes filler saves of many small
// messages during the cycle, so that a memtable fills and is flushed.
type logPoint struct {
	faultfs.SyncPoint
	upTo int
	fill bool
	// churn writes, during the cycle, saves that each replace a session's
	// history with new messages for the value log: with --retain-revisions
	// 1, garbage for the value-log GC.
	churn bool
	// afterLog, when set, arms the point only once savepointd logs a line
	// holding it during the cycle (until then no sync counts); the cut was
	// made while that work was in progress when no line holding doneLog
	// follows the last such line in the log.
	afterLog, doneLog string
}

type powerReport struct {
	crashReport
	atSync  int // cuts made at an injected sync rather than at a random moment
	atPoint int // of which at a named point (logPoints)
	refused int // restarts refused (behind the high-water mark), then served with --accept-data-loss
	syncs   faultfs.Stats
	// inProgress counts the cuts at a point with afterLog made while the
	// work it logs was in progress (its doneLog not yet logged).
	inProgress int
	gcStats
}

// gcStats counts, in savepointd's logs, Badger's value-log rewrites begun
// and ended (at debug level), the files the maintenance passes that
// completed reported rewritten, and the values moved by a GC a cut
// interrupted that a restart wrote back, or found without a copy
// (daemon/badgerstore/gc_recover.go).
type gcStats struct {
	gcBegun, gcRewritten, gcDone int
	writtenBack, noCopy          int
}

func (r powerReport) line() string {
	return fmt.Sprintf("%s cuts-at-a-sync=%d cuts-at-a-log-point=%d restarts-refused=%d file-syncs=%d dir-syncs=%d",
		r.crashReport.line(), r.atSync, r.atPoint, r.refused, r.syncs.FileSyncs, r.syncs.DirSyncs)
}

func runPowerCut(t *testing.T, bin string, cfg crashConfig) powerReport {
	return runPowerCutAt(t, bin, cfg, nil)
}

// runPowerCutAt runs the harness; with points, cycle i cuts at the point
// i modulo their number, else each cycle cuts at a random moment, at a
// random sync, or at a random one of logPoints.
func runPowerCutAt(t *testing.T, bin string, cfg crashConfig, points []logPoint) powerReport {
	if err := faultfs.Available(); err != nil {
		t.Skipf("power-cut harness skipped: %v", err)
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	t.Logf("power-cut harness: %d cycles, %d clients, seed %d (rerun with -seed=%d)", cfg.cycles, cfg.clients, cfg.seed, cfg.seed)
	begin := time.Now()
	root := t.TempDir()
	backing := filepath.Join(root, "backing")
	if err := os.Mkdir(backing, 0o700); err != nil {
		t.Fatal(err)
	}
	var fsys *faultfs.FS
	t.Cleanup(func() { // runs after proc's cleanup has killed savepointd
		if fsys != nil {
			fsys.PowerCut()
			fsys.Unmount()
		}
	})
	p := newProc(t, bin, cfg.args...)
	p.dir = filepath.Join(root, "data") // the mount point; root outlives the unmount above
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rep := powerReport{}
	mount := func(cycle int) {
		var err error
		if fsys, err = faultfs.Mount(backing, p.dir, filepath.Join(root, fmt.Sprintf("shadow%d", cycle))); err != nil {
			t.Fatal(err)
		}
	}
	mount(0)
	p.mustStart()

	h := &harness{t: t, cfg: cfg, tally: newTally()}
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	workers := make([]*worker, cfg.clients)
	for i := range workers {
		workers[i] = &worker{h: h, id: i, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i)+1))}
	}
	all := func(fn func(w *worker)) {
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); fn(w) }()
		}
		wg.Wait()
	}
	cycles := 0
	for cycle := 1; cycle <= cfg.cycles; cycle++ {
		var stop atomic.Bool
		c := p.client
		acked0 := h.tally.acked.Load()
		loadFor := time.Duration(rng.Int64N(int64(cfg.maxLoad)))
		how := fmt.Sprintf("after %v of load", loadFor.Round(time.Millisecond))
		var point *logPoint
		switch {
		case len(points) > 0:
			point = &points[(cycle-1)%len(points)]
		case rng.IntN(2) == 0:
			n := 1 + rng.IntN(200)
			fsys.CutAtSync(n)
			loadFor = 10 * cfg.maxLoad // the cut comes first, unless the load is slow
			how = fmt.Sprintf("at sync %d of the cycle", n)
		case rng.IntN(2) == 0:
			point = &logPoints[rng.IntN(len(logPoints))]
		}
		var wg sync.WaitGroup
		var armed atomic.Bool
		if point != nil {
			n := 1 + rng.IntN(point.upTo)
			loadFor = 5 * time.Second // checkpoints come about once a second
			how = fmt.Sprintf("%s (sync %d of it)", point.Name, n)
			if point.afterLog == "" {
				fsys.CutAtSyncOf(point.SyncPoint, n)
			} else {
				wg.Add(1)
				go func(fsys *faultfs.FS, log *daemontest.SyncBuffer, sp faultfs.SyncPoint) {
					defer wg.Done()
					if armOnLog(log, point.afterLog, &stop) {
						fsys.CutAtSyncOf(sp, n)
						armed.Store(true)
					}
				}(fsys, p.stderr, point.SyncPoint)
			}
		}
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); w.load(c, &stop) }()
		}
		if point != nil && point.fill {
			loadFor = 30 * time.Second // a flush comes first, unless the disk is slow
			wg.Add(1)
			go func() { defer wg.Done(); fill(c, fmt.Sprint("fill-", cycle, "-"), &stop) }()
		}
		if point != nil && point.churn {
			for i := range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); churn(c, fmt.Sprint("churn-", cycle, "-", i, "-"), &stop) }()
			}
		}
		if point != nil && point.afterLog != "" {
			loadFor = 90 * time.Second // the logged work, then the cut, come first unless the disk is slow
		}
		cutAtSync := false
		select {
		case <-fsys.Cut():
			cutAtSync = true
			rep.atSync++
			if point != nil {
				rep.atPoint++
			}
		case <-time.After(loadFor):
			fsys.PowerCut()
		}
		p.kill()
		stop.Store(true)
		wg.Wait()
		cycles++
		log := p.stderr.String() // whole: the process is gone
		gc := gcCounts(log)
		rep.gcStats = rep.gcStats.add(gc)
		if point != nil && point.afterLog != "" {
			inProgress := armed.Load() && strings.LastIndex(log, point.afterLog) > strings.LastIndex(log, point.doneLog)
			if inProgress && cutAtSync {
				rep.inProgress++
			}
			how += fmt.Sprintf(", armed %t, in progress at the cut %t; value-log rewrites: %d begun, %d ended by Badger, %d reported by a completed pass", armed.Load(), inProgress, gc.gcBegun, gc.gcRewritten, gc.gcDone)
		}
		inFlight := 0
		for _, w := range workers {
			if w.inDoubt != nil {
				inFlight++
			}
		}
		st := fsys.Stats()
		rep.syncs.FileSyncs += st.FileSyncs
		rep.syncs.DirSyncs += st.DirSyncs
		rep.syncs.SyncedBytes += st.SyncedBytes
		if err := fsys.Unmount(); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Restore(); err != nil {
			t.Fatal(err)
		}
		fsys = nil
		image := ""
		if cfg.verifyEach {
			image = keepImage(t, backing, cycle)
		}
		mount(cycle)

		// Restart on what was durable; resolve the writes in flight at the
		// cut; read back what was acknowledged; resume every session.
		if err := p.start(); err != nil {
			if !cfg.broken {
				t.Fatalf("cycle %d: restart after the power cut: %v", cycle, err)
			}
			rep.refused++
			t.Logf("cycle %d: restart refused: %s", cycle, lastLines(p.stderr.String(), 3))
			if err := p.start("--accept-data-loss"); err != nil {
				t.Logf("cycle %d: restart with --accept-data-loss failed: %v", cycle, err)
				break
			}
		}
		c = p.client
		t0 := time.Now()
		all(func(w *worker) { w.resolve(c) })
		all(func(w *worker) { w.verifyAcks(c) })
		all(func(w *worker) { w.resume(c) })
		if cfg.verifyEach {
			// The Verify RPC reads every record, the writes of the churn and
			// the filler included, which the oracle does not check.
			ctx, cancel := ctxVerify()
			vr, err := c.Verify(ctx, &savepointv1.VerifyRequest{})
			cancel()
			switch {
			case err != nil:
				h.tally.weird("cycle %d: Verify RPC: %v", cycle, err)
			case len(vr.DamagedSessions) > 0:
				h.tally.weird("cycle %d: the Verify RPC lists damaged sessions after the restart (durable image kept in %s): %v", cycle, image, vr.DamagedSessions)
			default:
				os.RemoveAll(image)
			}
		}
		lost, torn, unread := h.tally.counts()
		t.Logf("cycle %d/%d: power cut %s, %d writes acknowledged, %d in flight, %d file and %d directory syncs; restarted in %v; resolved, read back and resumed in %v (lost=%d torn=%d unreadable=%d so far)",
			cycle, cfg.cycles, how, h.tally.acked.Load()-acked0, inFlight, st.FileSyncs, st.DirSyncs,
			p.started.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), lost, torn, unread)
	}

	// Read back every write acknowledged during the whole run.
	if p.running() {
		c := p.client
		all(func(w *worker) { w.verifyAll(c) })
		ctx, cancel := ctxVerify()
		vr, err := c.Verify(ctx, &savepointv1.VerifyRequest{})
		cancel()
		switch {
		case err != nil:
			h.tally.weird("Verify RPC: %v", err)
		case len(vr.DamagedSessions) > 0:
			h.tally.weird("Verify RPC lists damaged sessions: %v", vr.DamagedSessions)
		}
		if code := p.stop(); code != 0 && !cfg.broken {
			h.tally.weird("savepointd exited %d on SIGTERM", code)
		}
		rep.gcStats = rep.gcStats.add(gcCounts(p.stderr.String()))
		if code, out, errOut := runBin(bin, "verify", "--data-dir", p.dir); code != 0 && !cfg.broken {
			h.tally.weird("savepointd verify exited %d: %s %s", code, out, errOut)
		}
	}
	for _, n := range h.tally.notes {
		t.Log(n)
	}
	lost, torn, unread := h.tally.counts()
	rep.crashReport = crashReport{
		cycles: cycles, acked: h.tally.acked.Load(), lost: lost, torn: torn, unread: unread,
		inDoubt: h.tally.inDoubt.Load(), hadApplied: h.tally.hadApplied.Load(), unexpected: h.tally.unexpected.Load(),
		elapsed: time.Since(begin),
	}
	return rep
}

// background saves, until stop, sessions of revisions revisions, each
// replacing the session's history with msgs. Its writes are not the
// oracle's; a failed save ends it (the power cut).
func background(c savepointv1.SavepointServiceClient, prefix string, stop *atomic.Bool, msgs []*savepointv1.Message, revisions uint64) {
	for i := 0; !stop.Load(); i++ {
		sid := fmt.Sprint(prefix, i)
		for rev := uint64(0); rev < revisions && !stop.Load(); rev++ {
			ctx, cancel := ctxT()
			_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: rev,
				KeepMessages: proto.Uint64(0), AppendMessages: msgs})
			cancel()
			if err != nil {
				return
			}
		}
	}
}

// messages returns n messages of role whose content is a JSON string of
// size bytes.
func messages(n int, role string, size int) []*savepointv1.Message {
	text := fmt.Sprintf("%q", strings.Repeat("f", size))
	msgs := make([]*savepointv1.Message, n)
	for i := range msgs {
		msgs[i] = &savepointv1.Message{Role: role, ContentJson: text}
	}
	return msgs
}

// fill saves sessions of 1,000 messages of 400 bytes each, which stay in
// the memtable (under the value threshold): about 0.5 MiB a save, so that a
// memtable fills within seconds.
func fill(c savepointv1.SavepointServiceClient, prefix string, stop *atomic.Bool) {
	background(c, prefix, stop, messages(1000, "user", 400), 1)
}

// churn saves sessions of 50 revisions each replacing the history with 8
// messages of 1.5 KiB (over the 512-byte value threshold: they go to the
// value log), so that with --retain-revisions 1 each save leaves the
// previous one's 12 KiB of values as garbage.
func churn(c savepointv1.SavepointServiceClient, prefix string, stop *atomic.Bool) {
	background(c, prefix, stop, messages(8, "assistant", 1536), 50)
}

// armOnLog waits until log holds, after what it held when called, a line
// with text, and says whether it did before stop.
func armOnLog(log *daemontest.SyncBuffer, text string, stop *atomic.Bool) bool {
	off := len(log.String())
	for !stop.Load() {
		rest := log.From(off)
		if strings.Contains(rest, text) {
			return true
		}
		off += max(0, len(rest)-len(text))
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// gcBegins is Badger's log line (at debug level) as it begins to rewrite a
// value-log file; gcDone savepointd's as a maintenance pass that did
// something completes (retention.go maintainEvery), once the moved values
// are synced and the rewritten files deleted.
const (
	gcBegins      = "badger: Rewriting fid"
	gcRewritten   = "badger: Removing fid" // the file rewritten, its deletion deferred while collectValueLog syncs
	gcDone        = `level=INFO msg="retention and value-log GC"`
	gcWrittenBack = "wrote back the values a value-log GC was moving"
	gcNoCopy      = "values found damaged after a value-log GC was interrupted"
)

// gcCounts counts the gcStats of one savepointd's log.
func gcCounts(log string) gcStats {
	var st gcStats
	field := func(line, name string) int {
		k := 0
		if _, n, ok := strings.Cut(line, " "+name+"="); ok {
			fmt.Sscan(n, &k)
		}
		return k
	}
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, gcBegins):
			st.gcBegun++
		case strings.Contains(line, gcRewritten):
			st.gcRewritten++
		case strings.Contains(line, gcDone):
			st.gcDone += field(line, "rewritten_value_logs")
		case strings.Contains(line, gcWrittenBack):
			st.writtenBack += field(line, "recovered")
		case strings.Contains(line, gcNoCopy):
			st.noCopy += field(line, "without_a_copy")
		}
	}
	return st
}

func (a gcStats) add(b gcStats) gcStats {
	return gcStats{a.gcBegun + b.gcBegun, a.gcRewritten + b.gcRewritten, a.gcDone + b.gcDone, a.writtenBack + b.writtenBack, a.noCopy + b.noCopy}
}

// keepImage copies the durable image in backing to a directory that
// outlives the test, for a look at what a restart found, and returns it.
func keepImage(t *testing.T, backing string, cycle int) string {
	dir, err := os.MkdirTemp("", fmt.Sprintf("powercut-image-%d-", cycle))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backing+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("keeping the durable image: %v %s", err, out)
	}
	return dir
}
