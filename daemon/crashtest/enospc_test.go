package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ENOSPC on write. A commit makes no write(2) or pwrite64(2) call: Badger
// writes its logs and tables through shared memory maps (on a full disk that
// is a SIGBUS, which the engine's disk-space guard exists to prevent). The
// store's only write(2) calls are the high-water mark file, once a second,
// and Badger's MANIFEST, when a memtable is flushed to a table (at the latest
// at a clean stop). Both are failed here with strace -P FILE.

// TestENOSPCHighWaterMark fails every write of the high-water mark file: the
// daemon logs it and keeps acknowledging (the acknowledged writes are durable
// in Badger's synced log; only the rollback check falls behind), and after a
// kill -9 and restart every acknowledged write is intact.
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
	end := time.Now().Add(2500 * time.Millisecond)
	n := 0
	for time.Now().Before(end) {
		w.steps(t, p.client, 10)
		n += 10
	}
	after, _ := os.ReadFile(hwmPath)
	logged := strings.Contains(p.stderr.String(), "write high-water mark")
	p.kill()
	inj := tr.injected(t)
	t.Logf("%d writes acknowledged while every write of %s failed; %d injected; mark %q before and %q after; logged: %t",
		n, filepath.Base(hwmPath)+".tmp", len(inj), strings.TrimSpace(string(before)), strings.TrimSpace(string(after)), logged)
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
	fmt.Printf("%s: write(2) of savepoint.hwm.tmp failed with ENOSPC %d times: savepointd kept serving (logged it), mark stayed at %s; after kill -9 and restart acked=%d lost=%d torn=%d unreadable=%d\n",
		t.Name(), len(inj), strings.TrimSpace(string(before)), w.h.tally.acked.Load(), lost, torn, unread)
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
