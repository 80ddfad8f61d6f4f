package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

func saveN(t *testing.T, s *Store, sid string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: uint64(i),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf("%d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupCommit shows concurrent saves folded into far fewer commits (and
// so syncs) than saves, with every save acknowledged and readable. The sync
// is slowed to a disk's latency so that requests arrive while it is in flight.
func TestGroupCommit(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	sync0 := s.eng.sync
	s.eng.sync = func() error { time.Sleep(5 * time.Millisecond); return sync0() }
	before := s.Stats()
	const n = 32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprintf("g%d", i)})
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	commits, reqs := after.Commits-before.Commits, after.Requests-before.Requests
	t.Logf("%d saves in %d commits", reqs, commits)
	if reqs != n || commits > n/4 {
		t.Fatalf("%d saves took %d commits; want at most %d", reqs, commits, n/4)
	}
	for i := range n {
		if _, err := s.Checkpoint(ctx, fmt.Sprintf("g%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCommitAfterClose: a request sent after Close is answered
// UNAVAILABLE at once; it must not wait forever for a leader.
func TestCommitAfterClose(t *testing.T) {
	s := openT(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			if err := s.eng.commit([]write{{key: []byte(fmt.Sprintf("k%d", i)), val: []byte("v")}}); !errors.Is(err, core.ErrUnavailable) {
				done <- fmt.Errorf("commit %d after close: %v, want ErrUnavailable", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a commit after close hung")
	}
}

func TestSyncFailureIsFatal(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "ok", 1)
	s.eng.sync = func() error { return errors.New("EIO") }
	_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "lost"})
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("save whose sync failed: %v, want ErrUnavailable", err)
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed not closed after a sync error")
	}
	s.eng.sync = s.db.Sync // even if the disk recovers, nothing more is acknowledged
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "later"}); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("save after the failure: %v", err)
	}
}

func TestDiskGuard(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "s", 1)
	free := uint64(1 << 40)
	var mu sync.Mutex
	s.eng.statfs = func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }
	setFree := func(n uint64) { mu.Lock(); free = n; mu.Unlock() }
	setFree(s.eng.reserve - 1)
	_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
	if !errors.Is(err, core.ErrDiskFull) {
		t.Fatalf("save below the reserve: %v", err)
	}
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Revision != 1 {
		t.Fatalf("read while full: %+v %v", cp, err)
	}
	setFree(s.eng.reserve)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1}); err != nil {
		t.Fatalf("save after space returned: %v", err)
	}
}

// TestDiskGuardTmpfs fills a small tmpfs until writes are refused, before
// Badger can run out of room in its memory-mapped files.
func TestDiskGuardTmpfs(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskGuard covers the guard with a fake statfs", err, strings.TrimSpace(string(out)))
	}
	defer exec.Command("umount", "-l", dir).Run()
	const reserve = 160 << 20
	s, err := Open(filepath.Join(dir, "data"), Options{DiskReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saveN(t, s, "s", 3)
	free, _ := freeBytes(dir)
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, zeroReader{}, int64(free-reserve+(1<<20))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3})
	if !errors.Is(err, core.ErrDiskFull) {
		t.Fatalf("save on a full tmpfs: %v", err)
	}
	if ms, err := s.Messages(ctx, "s", 0, 0, 1<<20, 0); err != nil || len(ms) != 3 {
		t.Fatalf("read on a full tmpfs: %d messages, %v", len(ms), err)
	}
	os.Remove(filler)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3}); err != nil {
		t.Fatalf("save after freeing space: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// TestBehindHighWaterMark restores an older copy of the data under a newer
// high-water mark, as Badger's silent log truncation would leave it.
func TestBehindHighWaterMark(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	saveN(t, s, "s", 2)
	s.Close()
	old := filepath.Join(t.TempDir(), "old")
	copyDir(t, dir, old)
	s = openT(t, dir)
	saveN2 := func() {
		for i := 2; i < 5; i++ {
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	saveN2()
	mark := s.Stats().Seq
	s.Close()
	// Roll the data back, keeping the newer high-water mark.
	hwm, err := os.ReadFile(filepath.Join(dir, HWMFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(hwm)) != fmt.Sprint(mark) {
		t.Fatalf("high-water mark file holds %q, want %d", hwm, mark)
	}
	os.RemoveAll(dir)
	copyDir(t, old, dir)
	os.WriteFile(filepath.Join(dir, HWMFile), hwm, 0o600)

	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrBehind) || !strings.Contains(err.Error(), fmt.Sprint(mark)) {
		t.Fatalf("open behind the mark: %v", err)
	}
	s, err = Open(dir, Options{AcceptDataLoss: true})
	if err != nil {
		t.Fatalf("open with AcceptDataLoss: %v", err)
	}
	defer s.Close()
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Revision != 2 {
		t.Fatalf("serving what is left: %+v %v", cp, err)
	}
}

func TestMigrateFormat1(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	copyDir(t, "testdata/format1", dir)
	s := openT(t, dir)
	defer s.Close()
	var rec storagev1.FormatRecord
	if err := s.view(ctx, func(t *tx) error { _, err := get(t, nil, "", formatKey, &rec); return err }); err != nil || rec.Version != FormatVersion {
		t.Fatalf("format after migration: %v %v", rec.Version, err)
	}
	_, calls, err := s.PendingToolUses(ctx, "fixture-1")
	if err != nil || len(calls) != 1 || !calls[0].Begun || calls[0].Effect == nil || calls[0].Effect.Output != "written" {
		t.Fatalf("fixture session after migration: %+v %v", calls, err)
	}
	if s.Stats().Seq == 0 {
		t.Fatal("no commit sequence number after migration")
	}
}

// TestMigrateFormat2 moves the request ids that format 2 kept in each
// session's head to their own records: a retry of a save made before the
// upgrade is still answered with its original response.
func TestMigrateFormat2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	copyDir(t, "testdata/format2", dir)
	s := openT(t, dir)
	defer s.Close()
	var h storagev1.SessionRecord
	if err := s.view(ctx, func(t *tx) error { _, err := get(t, nil, "", sessionKey("fixture-1"), &h); return err }); err != nil {
		t.Fatal(err)
	}
	if n := len(h.RecentRequests); n != 0 { //nolint:staticcheck // the old format's field
		t.Fatalf("head still holds %d request ids", n)
	}
	retry := &core.SaveRequest{SessionID: "fixture-1", Task: "report", RequestID: "2b0e9c1e-4f1d-4c7a-9a55-0d6f3f1e8a01",
		AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hello"`}}}
	res, err := s.SaveCheckpoint(ctx, retry)
	if err != nil || res != (core.SaveResult{Revision: 1, MessageCount: 1, Epoch: 1}) {
		t.Fatalf("retry of a pre-upgrade save: %+v %v", res, err)
	}
	if cp, _ := s.Checkpoint(ctx, "fixture-1", 0); cp.Revision != 2 {
		t.Fatalf("the retry saved again: revision %d", cp.Revision)
	}
}

// TestLeaderCommitsOnItsOwnGoroutine: every commit's sync runs on the
// goroutine of a request that is in the batch (its send), never on a
// goroutine of the store's own, alone or under concurrent saves; and a
// waiting request that gives up while it is being made leader leaves no
// batch behind it stranded.
func TestLeaderCommitsOnItsOwnGoroutine(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	sync0 := s.eng.sync
	var mu sync.Mutex
	var syncs, foreign int
	s.eng.sync = func() error {
		buf := make([]byte, 64<<10)
		stack := string(buf[:runtime.Stack(buf, false)])
		mu.Lock()
		syncs++
		if !strings.Contains(stack, "(*engine).send") {
			foreign++
			t.Logf("a sync outside a request's goroutine:\n%s", stack)
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // let requests queue behind it
		return sync0()
	}
	saveN(t, s, "alone", 3)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { saveN(t, s, fmt.Sprintf("c%d", i), 5) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if syncs == 0 || foreign != 0 {
		t.Fatalf("%d of %d syncs ran outside a request's goroutine", foreign, syncs)
	}
	if st := s.Stats(); st.Commits >= st.Requests {
		t.Fatalf("%d requests in %d commits: no batch formed behind a leader", st.Requests, st.Commits)
	}
}

// TestFollowerGivesUpWhileQueued: a request that gives up while queued
// behind a stuck commit leaves the queue; the saves queued behind it are
// still committed once the sync returns.
func TestFollowerGivesUpWhileQueued(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sync0 := s.eng.sync
	s.eng.sync = func() error {
		once.Do(func() { close(entered); <-release })
		return sync0()
	}
	first := make(chan error, 1)
	go func() { _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "first"}); first <- err }()
	<-entered
	// An exclusive request heads the next batch, so the saves behind it
	// form a batch of their own, led by the first of them.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- s.eng.runExclusive(short, func() error { return nil }) }()
	for {
		s.eng.mu.Lock()
		n := len(s.eng.queue)
		s.eng.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	saved := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprintf("behind%d", i)})
			saved <- err
		}()
	}
	if err := <-gaveUp; !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("an exclusive request behind a stuck sync: %v, want ErrUnavailable", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 4 {
		select {
		case err := <-saved:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("saves queued behind a request that gave up were never committed")
		}
	}
}

// TestFollowerGivesUpWhileMadeLeader: a request whose wait ends (its
// context done) just as the leader makes it the next leader still leads,
// in the background, so the save queued behind it is committed.
func TestFollowerGivesUpWhileMadeLeader(t *testing.T) {
	s := openT(t, t.TempDir()) // closed only once nothing waits: Close waits for the leader
	e := s.eng
	e.mu.Lock() // a leader of our own, whose hand-off the test makes
	e.busy = true
	e.leaders.Add(1)
	e.mu.Unlock()
	giving, cancel := context.WithCancel(ctx)
	probe := &op{probe: true, done: make(chan error, 1)}
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- e.send(giving, probe) }()
	queued := func(n int) {
		for {
			e.mu.Lock()
			l := len(e.queue)
			e.mu.Unlock()
			if l == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	queued(1)
	saved := make(chan error, 1)
	go func() { _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "behind"}); saved <- err }()
	queued(2)
	// The hand-off (handOff) with the probe's wait ending in between: its
	// context is done while it waits, and it is made leader before it can
	// take the lock to leave the queue.
	e.mu.Lock()
	cancel()
	time.Sleep(100 * time.Millisecond) // the probe's goroutine now waits for the lock
	probe.lead = true
	e.mu.Unlock()
	probe.done <- errLead
	if err := <-gaveUp; !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("a request whose context ended: %v, want ErrUnavailable", err)
	}
	select {
	case err := <-saved:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the save queued behind a request that gave up as it was made leader was never committed")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
