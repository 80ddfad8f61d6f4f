package crashtest

import (
	"fmt"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ENOSPC on write. Besides the write-ahead log's preallocated segments
// (pwrite64 into blocks already allocated) and Badger's memory-mapped files
// (on a full disk a SIGBUS, which the engine's disk-space guard exists to
// prevent), the store's write(2) calls are the high-water mark file, once a
// second, and Badger's MANIFEST, when a memtable is flushed to a table (at
// the latest at a clean stop). Both are failed here with strace -P FILE.

// TestENOSPCHighWaterMark fails every write of the high-water mark file:
// the daemon refuses writes with DISK_FULL while the mark cannot be
// written (the rollback check would otherwise fall behind), serves reads,
// and acknowledges again once the mark is written; after a kill -9 and a
// restart every acknowledged write is intact.
func TestENOSPCHighWaterMark(t *testing.T) {
	strace := needStrace(t)
	p, w := faultSetup(t, 11)
	time.Sleep(1200 * time.Millisecond) // the mark covers the setup's writes
	hwmPath := filepath.Join(p.dir, "savepoint.hwm")
	before, err := os.ReadFile(hwmPath)
	if err != nil {
		t.Fatal(err)
	}
	tr := attach(t, strace, p.pid(), "-P", hwmPath+".tmp", "-e", "trace=write", "-e", "inject=write:error=ENOSPC")
	// Write until a write is refused: the first one after a failed write
	// of the mark.
	var refused *op
	n := 0
	for end := time.Now().Add(10 * time.Second); refused == nil && time.Now().Before(end); {
		o := w.next()
		ctx, cancel := ctxT()
		err := w.do(ctx, p.client, o)
		cancel()
		switch {
		case err == nil:
			n++
		case reasonOf(err) == "DISK_FULL":
			refused = o
		default:
			t.Fatalf("%s of %s while the mark cannot be written: %v", kindNames[o.kind], o.s.id, err)
		}
	}
	if refused == nil {
		t.Fatalf("%d writes acknowledged in 10 s while every write of the high-water mark failed; none refused with DISK_FULL", n)
	}
	if _, err := p.client.GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: refused.s.id}); err != nil && reasonOf(err) != "SESSION_NOT_FOUND" {
		t.Errorf("a read while writes are refused: %v", err)
	}
	after, _ := os.ReadFile(hwmPath)
	inj := tr.injected(t) // detaches strace: the mark can be written again
	// The refused write is retried until the mark is written again.
	var resumed time.Duration
	for t0, end := time.Now(), time.Now().Add(10*time.Second); ; {
		ctx, cancel := ctxT()
		err := w.do(ctx, p.client, refused)
		cancel()
		if err == nil {
			resumed = time.Since(t0)
			break
		}
		if reasonOf(err) != "DISK_FULL" || time.Now().After(end) {
			t.Fatalf("the refused %s after the mark could be written again: %v", kindNames[refused.kind], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.steps(t, p.client, 10)
	logged := strings.Contains(p.stderr.String(), "write high-water mark: no space")
	p.kill()
	t.Logf("%d writes acknowledged before the first refusal; %d writes of %s failed; mark %q before and %q while failing; writes resumed %v after strace detached; logged: %t",
		n, len(inj), filepath.Base(hwmPath)+".tmp", strings.TrimSpace(string(before)), strings.TrimSpace(string(after)), resumed.Round(time.Millisecond), logged)
	if len(inj) == 0 {
		t.Fatalf("strace injected nothing: %s", tr.stderr)
	}
	if !logged {
		t.Errorf("the failed high-water mark write was not logged:\n%s", p.stderr)
	}
	if string(after) != string(before) {
		t.Errorf("the high-water mark changed from %q to %q although every write of it failed", before, after)
	}
	p.mustStart()
	w.verifyAll(p.client)
	w.resume(p.client)
	lost, torn, unread := w.h.tally.counts()
	fmt.Printf("%s: write(2) of savepoint.hwm.tmp failed with ENOSPC %d times: writes refused with DISK_FULL after %d acknowledged, reads served, writes resumed %v after the mark could be written; after kill -9 and restart acked=%d lost=%d torn=%d unreadable=%d\n",
		t.Name(), len(inj), n, resumed.Round(time.Millisecond), w.h.tally.acked.Load(), lost, torn, unread)
	if lost+torn+unread > 0 || w.h.tally.unexpected.Load() > 0 {
		t.Fatalf("%v", w.h.tally.notes)
	}
}

// TestENOSPCManifestAtStop fails every write of Badger's MANIFEST while
// savepointd stops on SIGTERM, so that the flush of its memtable to a table
// cannot be recorded. It reports how the stop behaves and requires that
// every acknowledged write is intact after a restart.
func TestENOSPCManifestAtStop(t *testing.T) {
	strace := needStrace(t)
	p, w := faultSetup(t, 12)
	tr := attach(t, strace, p.pid(), "-P", filepath.Join(p.dir, "MANIFEST"), "-e", "trace=write", "-e", "inject=write:error=ENOSPC")
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, exited := p.wait(5 * time.Second)
	behaviour := fmt.Sprintf("exited %d", code)
	if !exited {
		// Badger retries the flush once a second for ever; detaching strace
		// lets the next retry succeed.
		behaviour = "still stopping after 5s (Badger retries the memtable flush every second); exited %d once strace detached"
		tr.cmd.Process.Signal(syscall.SIGTERM)
		code, exited = p.wait(10 * time.Second)
		if !exited {
			t.Fatalf("savepointd did not exit after strace detached\nstderr:\n%s", p.stderr)
		}
		behaviour = fmt.Sprintf(behaviour, code)
	}
	inj := tr.injected(t)
	t.Logf("SIGTERM with MANIFEST writes failing: %s; %d writes injected; savepointd logged:\n%s", behaviour, len(inj), lastLines(p.stderr.String(), 4))
	if len(inj) == 0 {
		// savepointd leaves its memtables in the synced WAL at a stop, so a
		// clean stop writes no MANIFEST at all.
		behaviour += " without writing the MANIFEST"
	}
	p.mustStart()
	w.verifyAll(p.client)
	w.resume(p.client)
	lost, torn, unread := w.h.tally.counts()
	fmt.Printf("%s: write(2) of MANIFEST failed with ENOSPC %d times during a clean stop: savepointd %s; after restart acked=%d lost=%d torn=%d unreadable=%d\n",
		t.Name(), len(inj), behaviour, w.h.tally.acked.Load(), lost, torn, unread)
	if lost+torn+unread > 0 || w.h.tally.unexpected.Load() > 0 {
		t.Fatalf("%v", w.h.tally.notes)
	}
}
