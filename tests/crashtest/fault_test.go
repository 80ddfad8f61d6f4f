package crashtest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// Fault injection on the sync path. A kill -9 test passes even with syncs
// off, because the page cache outlives the process; these tests make the
// syncs themselves fail, with strace, and check that the write whose sync
// failed is never acknowledged, that savepointd stops acknowledging and
// exits non-zero, and that after a restart every earlier acknowledged write
// is intact.
//
// The sync points (docs/reliability.md, "The commit path"): each commit is
// one record of savepointd's write-ahead log, made durable by one
// fdatasync of the current segment (data/wal/NNNNNNNNNNNNNNNN.seg) before
// it is applied to Badger and acknowledged; Badger is made durable in the
// background, at a checkpoint about once a second: an fdatasync of the
// current value log (NNNNNN.vlog), of every memtable's log (NNNNN.mem),
// then Badger's db.Sync, two msync(MS_SYNC) calls (the active memtable's
// log, then the value log), then the write of the log's mark. A failure of
// the log's sync must fail the write it was for; a failure of a
// checkpoint's sync must stop every later acknowledgement; either way
// savepointd must exit non-zero, and after a restart (which replays the log
// into Badger) every acknowledged write must be intact.
//
// strace counts `when=N` per syscall *and per thread*, and Go runs the
// commit on whichever thread is free, so a `when=N` counted from process
// start does not name one commit. The tests therefore start savepointd,
// make some acknowledged writes, and then attach strace to the running
// process (strace -f -p PID), filtered by -P to the one file whose sync is
// to fail where the call names a file (fdatasync); msync names a mapping,
// read from /proc/PID/maps. Which file an injected call hit is read from
// the trace, never assumed.

func needStrace(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIP: strace is not installed, so the fault-injection tests cannot run; " +
			"`make test` installs it (apt-get install strace)")
	}
	return path
}

// tracer is strace attached to a running savepointd.
type tracer struct {
	cmd    *exec.Cmd
	out    string // the trace file
	stderr *daemontest.SyncBuffer
	done   chan struct{}
}

// attach attaches strace to pid with the given filter and injection
// arguments and waits until every thread is traced.
func attach(t *testing.T, strace string, pid int, args ...string) *tracer {
	t.Helper()
	tr := &tracer{out: filepath.Join(t.TempDir(), "strace.txt"), stderr: &daemontest.SyncBuffer{}, done: make(chan struct{})}
	all := append([]string{"-f", "-tt", "-o", tr.out, "-p", strconv.Itoa(pid)}, args...)
	tr.cmd = exec.Command(strace, all...)
	tr.cmd.Stderr = tr.stderr
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { tr.cmd.Wait(); close(tr.done) }()
	t.Cleanup(func() {
		tr.cmd.Process.Signal(syscall.SIGTERM)
		<-tr.done
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tr.stderr.String(), "attached") {
		select {
		case <-tr.done:
			t.Skipf("SKIP: strace cannot attach to savepointd here (ptrace refused?): %s", tr.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strace did not attach: %s", tr.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let strace seize the remaining threads
	return tr
}

// injected returns the trace lines of injected faults, in order.
func (tr *tracer) injected(t *testing.T) []string {
	select {
	case <-tr.done:
	case <-time.After(10 * time.Second):
		tr.cmd.Process.Signal(syscall.SIGTERM)
		<-tr.done
	}
	b, err := os.ReadFile(tr.out)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "(INJECTED)") {
			out = append(out, l)
		}
	}
	return out
}

// mappings returns the start address of each of Badger's log files mapped by
// pid: the write-ahead logs (*.mem) and the value logs (*.vlog).
func mappings(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		name := fields[5]
		if strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog") {
			start, _, _ := strings.Cut(fields[0], "-")
			n, _ := strconv.ParseUint(start, 16, 64)
			m[fmt.Sprintf("0x%x", n)] = filepath.Base(name)
		}
	}
	return m
}

// msyncTarget names the file an injected msync line synced.
func msyncTarget(line string, maps map[string]string) string {
	_, rest, ok := strings.Cut(line, "msync(")
	if !ok {
		return "?"
	}
	addr, _, _ := strings.Cut(rest, ",")
	if name, ok := maps[addr]; ok {
		return name
	}
	return "unknown mapping " + addr
}

// faultSetup starts savepointd and makes acknowledged writes through one
// client of the crash harness, plus one message over the value threshold, so
// that both of Badger's logs hold acknowledged data.
func faultSetup(t *testing.T, seed uint64) (*proc, *worker) {
	t.Helper()
	p := newProc(t, binary(t, false))
	p.mustStart()
	h := &harness{t: t, cfg: crashConfig{}, tally: newTally()}
	w := &worker{h: h, rng: rand.New(rand.NewPCG(seed, 1))}
	w.steps(t, p.client, 40)
	big := w.bigSave()
	ctx, cancel := ctxT()
	defer cancel()
	if err := w.do(ctx, p.client, big); err != nil {
		t.Fatalf("save with a 1.5 MiB message: %v", err)
	}
	w.steps(t, p.client, 10)
	return p, w
}

// steps runs n operations of the client's loop, each acknowledged.
func (w *worker) steps(t *testing.T, c savepointv1.SavepointServiceClient, n int) {
	t.Helper()
	for range n {
		o := w.next()
		ctx, cancel := ctxT()
		err := w.do(ctx, c, o)
		cancel()
		if err != nil {
			t.Fatalf("%s of %s: %v", kindNames[o.kind], o.s.id, err)
		}
	}
}

// bigSave is a save of a new session with one message of 1.5 MiB, over
// Badger's 1 MiB value threshold, so that its value goes to the value log.
func (w *worker) bigSave() *op {
	w.gen++
	s := newSession(fmt.Sprintf("big-%d", w.gen))
	w.sessions = append(w.sessions, s)
	msgs := []*savepointv1.Message{
		{Role: "user", ContentJson: `{"text":"a large attachment follows"}`},
		{Role: "assistant", ContentJson: fmt.Sprintf(`{"text":%q}`, padding(w.rng, 1536<<10))},
	}
	return &op{kind: kindSave, s: s, hist: msgs, save: &savepointv1.SaveCheckpointRequest{
		SessionId: s.id, RequestId: uuid.NewString(), Task: "value log", Turn: 1, AppendMessages: msgs,
	}}
}

// syncFault is one injected sync failure.
type syncFault struct {
	call string // fdatasync or msync
	when string // the when= of the injection
	// path returns the file the call is filtered to (fdatasync), given the
	// data directory; nil for msync.
	path func(t *testing.T, dir string) string
	want string // the suffix of the file the injected call must hit
	big  bool   // each write is a save with a 1.5 MiB message (the value log)
	// background: the sync is a checkpoint's, not a write's; the writes go
	// on until one is refused.
	background bool
}

// TestSyncFailureLog fails the fdatasync of the write-ahead log's segment
// under one small save: the save must not be acknowledged.
func TestSyncFailureLog(t *testing.T) {
	syncFailure(t, syncFault{call: "fdatasync", when: "1", path: currentSegment, want: ".seg"})
}

// TestSyncFailureLogValue fails the fdatasync of the write-ahead log's
// segment under a save whose 1.5 MiB message goes to Badger's value log:
// the log's record holds it, so it is that sync that must fail the save.
func TestSyncFailureLogValue(t *testing.T) {
	syncFailure(t, syncFault{call: "fdatasync", when: "1", path: currentSegment, want: ".seg", big: true})
}

// TestSyncFailureValueLog fails the fdatasync of Badger's value log at a
// background checkpoint, after saves whose 1.5 MiB messages went there.
func TestSyncFailureValueLog(t *testing.T) {
	syncFailure(t, syncFault{call: "fdatasync", when: "1", path: newestFile(".vlog"), want: ".vlog", big: true, background: true})
}

// TestSyncFailureMemtable fails the first msync of a background
// checkpoint's db.Sync, that of Badger's memtable log (.mem).
func TestSyncFailureMemtable(t *testing.T) {
	syncFailure(t, syncFault{call: "msync", when: "1", want: ".mem", background: true})
}

// TestSyncFailureBadgerValueLog fails the second msync of a thread, which
// is that of the value log when db.Sync runs on one thread.
func TestSyncFailureBadgerValueLog(t *testing.T) {
	syncFailure(t, syncFault{call: "msync", when: "2", want: ".vlog", big: true, background: true})
}

// currentSegment is the newest segment of the write-ahead log in dir.
func currentSegment(t *testing.T, dir string) string {
	return newestFile(".seg")(t, filepath.Join(dir, "wal"))
}

// newestFile returns a function naming the file with suffix whose name
// sorts last in a directory.
func newestFile(suffix string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
		if err != nil || len(names) == 0 {
			t.Fatalf("no %s file in %s (%v)", suffix, dir, err)
		}
		return names[len(names)-1]
	}
}

func syncFailure(t *testing.T, f syncFault) {
	strace := needStrace(t)
	for attempt := 1; attempt <= 4; attempt++ {
		if syncFailureOnce(t, strace, f, uint64(attempt)) {
			return
		}
		t.Logf("attempt %d: the injected %s hit another file (the checkpoint changed threads); trying again", attempt, f.call)
	}
	t.Fatalf("no attempt failed the %s of the %s file", f.call, f.want)
}

// syncFailureOnce returns false when the injected fault hit a file other
// than f.want, so that the caller tries again.
func syncFailureOnce(t *testing.T, strace string, f syncFault, seed uint64) bool {
	p, w := faultSetup(t, seed)
	earlier := w.h.tally.acked.Load()
	maps := mappings(t, p.pid())
	args := []string{"-y", "-e", "trace=" + f.call, "-e", "inject=" + f.call + ":error=EIO:when=" + f.when}
	if f.path != nil {
		args = append([]string{"-P", f.path(t, p.dir)}, args...)
	}
	tr := attach(t, strace, p.pid(), args...)

	// Write until a write fails: the first write after the attach when the
	// log's sync fails; the first after the next checkpoint when Badger's.
	var failed *op
	var failErr error
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; failed == nil && (i < 5 || f.background && time.Now().Before(deadline)); i++ {
		o := w.next()
		if f.big {
			o = w.bigSave()
		}
		ctx, cancel := ctxT()
		err := w.do(ctx, p.client, o)
		cancel()
		if err != nil {
			failed, failErr = o, err
		}
		if f.background {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if failed == nil {
		t.Fatalf("no write failed with %s failing (when=%s)", f.call, f.when)
	}
	t.Logf("the write refused after the failed sync (%s of %s) was answered: %v", kindNames[failed.kind], failed.s.id, failErr)
	if status.Code(failErr) != codes.Unavailable {
		t.Errorf("the failed write was answered %v, want UNAVAILABLE", status.Code(failErr))
	}

	// No more acknowledgements.
	for i := range 3 {
		ctx, cancel := ctxT()
		_, err := p.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
			SessionId: fmt.Sprintf("after-failure-%d", i), AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: "{}"}}})
		cancel()
		if err == nil {
			t.Errorf("a save after the sync failure was acknowledged")
		}
	}
	code, exited := p.wait(30 * time.Second)
	if !exited {
		t.Fatalf("savepointd still runs 30s after its sync failed\nstderr:\n%s", p.stderr)
	}
	if code == 0 {
		t.Errorf("savepointd exited 0 after a sync failure")
	}
	inj := tr.injected(t)
	if len(inj) == 0 {
		t.Fatalf("strace injected nothing; its stderr: %s", tr.stderr)
	}
	hit := syncTarget(inj[0], maps)
	t.Logf("strace: %s", strings.TrimSpace(inj[0]))
	t.Logf("that %s synced %s; savepointd exited %d; it logged:\n%s", f.call, hit, code, lastLines(p.stderr.String(), 4))
	if !strings.HasSuffix(hit, f.want) {
		return false
	}
	if f.background && !strings.Contains(p.stderr.String(), "checkpoint: ") {
		t.Errorf("savepointd did not report the failed checkpoint as the reason it stopped")
	}

	// After a restart every earlier acknowledged write is intact, and the
	// failed write is either absent or whole (the retry then applies it).
	if err := p.start(); err != nil {
		if strings.Contains(err.Error(), "file does not exist for table") && knownManifestDefect {
			fmt.Printf("%s: KNOWN DEFECT (see TestSyncFailureManifestAtStop): after the injected %s failure the store cannot be opened: %s\n",
				t.Name(), f.call, lastLines(err.Error(), 1))
			return true
		}
		t.Fatal(err)
	}
	w.inDoubt = failed
	w.resolve(p.client)
	w.verifyAll(p.client)
	w.resume(p.client)
	lost, torn, unread := w.h.tally.counts()
	fmt.Printf("%s: %s of %s failed with EIO (when=%s): client got %s, savepointd exited %d; after restart earlier-acked=%d acked=%d lost=%d torn=%d unreadable=%d (the failed write had been applied: %t)\n",
		t.Name(), f.call, hit, f.when, status.Code(failErr), code, earlier, w.h.tally.acked.Load(), lost, torn, unread, w.h.tally.hadApplied.Load() > 0)
	if lost+torn+unread > 0 || w.h.tally.unexpected.Load() > 0 {
		for _, n := range w.h.tally.notes {
			t.Log(n)
		}
		t.Fatalf("lost=%d torn=%d unreadable=%d unexpected=%d", lost, torn, unread, w.h.tally.unexpected.Load())
	}
	return true
}

// syncTarget names the file an injected sync line synced: the path strace
// -y printed for an fdatasync, the mapping of an msync's address.
func syncTarget(line string, maps map[string]string) string {
	if _, rest, ok := strings.Cut(line, "fdatasync("); ok {
		if _, path, ok := strings.Cut(rest, "<"); ok {
			path, _, _ = strings.Cut(path, ">")
			return filepath.Base(path)
		}
		return "?"
	}
	return msyncTarget(line, maps)
}

// knownManifestDefect records a defect of Badger v4.9.6 that this package
// found: when the fsync of the MANIFEST fails while a memtable is flushed to
// a table, Badger deletes the new table and retries the flush under a new
// table id, but the MANIFEST keeps the record that added the deleted table.
// Every later open then fails with "file does not exist for table N": no
// acknowledged write can be read until the MANIFEST is repaired by hand. A
// clean stop flushes the memtable, so one transient fsync error at a stop is
// enough; savepointd even exits 0 (the retried flush succeeded). While this
// is true the test reports the defect instead of failing; set it to false
// once the store avoids it (for example by not flushing at Close after a
// storage error, and by not retrying a flush whose MANIFEST append failed).
// savepointd no longer flushes at a stop (badgerstore.Options.ExitAfterClose)
// nor closes Badger after a storage failure, so the stop can no longer
// trigger it; a flush while running still can (Badger's defect, untested).
const knownManifestDefect = false

// TestSyncFailureManifestAtStop fails the first fsync of Badger's MANIFEST
// during a clean stop (the flush of the memtable to a table) and requires
// every acknowledged write to be intact after a restart.
func TestSyncFailureManifestAtStop(t *testing.T) {
	strace := needStrace(t)
	p, w := faultSetup(t, 13)
	tr := attach(t, strace, p.pid(), "-P", filepath.Join(p.dir, "MANIFEST"), "-e", "trace=write,fsync,fdatasync",
		"-e", "inject=fsync,fdatasync:error=EIO:when=1")
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, exited := p.wait(30 * time.Second)
	if !exited {
		t.Fatalf("savepointd did not stop\nstderr:\n%s", p.stderr)
	}
	inj := tr.injected(t)
	if len(inj) == 0 {
		// savepointd leaves its memtables in the synced WAL at a stop
		// (badgerstore.Options.ExitAfterClose): no MANIFEST write to fail.
		fmt.Printf("%s: a clean stop made no fsync of the MANIFEST (nothing to inject): savepointd exited %d\n", t.Name(), code)
	} else {
		t.Logf("strace: %s", strings.TrimSpace(inj[0]))
	}
	t.Logf("savepointd exited %d after SIGTERM; it logged:\n%s", code, lastLines(p.stderr.String(), 3))
	err := p.start()
	if err != nil {
		fmt.Printf("%s: fsync of MANIFEST failed with EIO once during a clean stop: savepointd exited %d; the restart failed: %s\n",
			t.Name(), code, lastLines(err.Error(), 1))
		vcode, _, verr := runBin(p.bin, "verify", "--data-dir", p.dir)
		t.Logf("savepointd verify: exit %d: %s", vcode, lastLines(verr, 1))
		if knownManifestDefect && strings.Contains(err.Error(), "file does not exist for table") {
			fmt.Printf("%s: KNOWN DEFECT: Badger's MANIFEST names a table it deleted; no acknowledged write is readable (savepointd verify exit %d)\n", t.Name(), vcode)
			return
		}
		t.Fatal(err)
	}
	if knownManifestDefect {
		t.Logf("the known MANIFEST defect did not show: set knownManifestDefect to false")
	}
	w.verifyAll(p.client)
	lost, torn, unread := w.h.tally.counts()
	fmt.Printf("%s: fsync of MANIFEST failed with EIO %d times during a clean stop: savepointd exited %d; after restart acked=%d lost=%d torn=%d unreadable=%d\n",
		t.Name(), len(inj), code, w.h.tally.acked.Load(), lost, torn, unread)
	if lost+torn+unread > 0 {
		t.Fatalf("%v", w.h.tally.notes)
	}
}

// TestSyncFailureManifestRunning fails the first fsync of Badger's MANIFEST
// while savepointd runs, at the memtable flush that a few MiB of small
// records force, then requires every acknowledged write to be intact after a clean
// stop and a restart. Badger v4.9.6 then keeps the MANIFEST record of the
// table it deleted, which no checkpoint saw in Badger's levels, and the
// restart removes that record itself, with no repair by hand.
func TestSyncFailureManifestRunning(t *testing.T) {
	strace := needStrace(t)
	p, w := faultSetup(t, 14)
	tr := attach(t, strace, p.pid(), "-P", filepath.Join(p.dir, "MANIFEST"), "-e", "trace=write,fsync,fdatasync",
		"-e", "inject=fsync,fdatasync:error=EIO:when=1")
	// 400-byte messages stay under the value threshold, in the memtable:
	// each filler save puts about 0.5 MiB there.
	filler := fmt.Sprintf("%q", strings.Repeat("f", 400))
	fillerMsgs := make([]*savepointv1.Message, 1000)
	for i := range fillerMsgs {
		fillerMsgs[i] = &savepointv1.Message{Role: "user", ContentJson: filler}
	}
	deadline := time.Now().Add(30 * time.Second)
	injected := false
	fills := 0
	for i := 0; !injected && time.Now().Before(deadline); i++ {
		ctx, cancel := ctxT()
		_, err := p.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprint("fill-", i),
			AppendMessages: fillerMsgs})
		cancel()
		if err != nil {
			t.Fatalf("filler save %d: %v", i, err)
		}
		fills++
		b, _ := os.ReadFile(tr.out)
		injected = strings.Contains(string(b), "(INJECTED)")
	}
	tr.cmd.Process.Signal(syscall.SIGTERM) // detach: Badger's retried flush succeeds
	<-tr.done
	if !injected {
		t.Fatalf("no MANIFEST fsync to fail within 30 s of writes")
	}
	time.Sleep(2 * time.Second) // Badger retries the flush after a second
	w.steps(t, p.client, 10)
	code := p.stop()
	if err := p.start(); err != nil {
		t.Fatalf("fsync of MANIFEST failed with EIO once during a memtable flush while running (savepointd stopped with %d): the restart failed: %v",
			code, lastLines(err.Error(), 1))
	}
	healed := ""
	for l := range strings.Lines(p.stderr.String()) {
		if strings.Contains(l, "removed the MANIFEST records of missing tables") {
			healed = strings.TrimSpace(l)
		}
	}
	if healed == "" {
		t.Fatalf("the restart did not say it removed the deleted table's MANIFEST record; stderr:\n%s", p.stderr)
	}
	fmt.Printf("%s: fsync of MANIFEST failed with EIO once during a memtable flush while running: savepointd stopped with %d, and its restart removed the deleted table's record itself: %s\n",
		t.Name(), code, healed)
	w.verifyAll(p.client)
	for i := range fills { // the acknowledged filler saves, around the failed flush
		ctx, cancel := ctxT()
		g, err := p.client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: fmt.Sprint("fill-", i)})
		cancel()
		if err != nil || len(g.Checkpoint.Messages) != len(fillerMsgs) {
			t.Fatalf("filler save %d after restart: %v", i, err)
		}
		for _, m := range g.Checkpoint.Messages {
			if m.ContentJson != filler {
				t.Fatalf("filler save %d after restart: a message reads %.40q", i, m.ContentJson)
			}
		}
	}
	lost, torn, unread := w.h.tally.counts()
	fmt.Printf("%s: fsync of MANIFEST failed with EIO once during a memtable flush while running: after restart acked=%d (and %d filler saves) lost=%d torn=%d unreadable=%d\n",
		t.Name(), w.h.tally.acked.Load(), fills, lost, torn, unread)
	if lost+torn+unread > 0 {
		t.Fatalf("%v", w.h.tally.notes)
	}
}
