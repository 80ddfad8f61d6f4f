package crashtest

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/tests/crashtest/faultfs"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

var flagGCCycles = flag.Int("powercut-gc-cycles", 4, "power cuts during value-log GC (make powerloss-gc: CYCLES); 0 skips TestPowerCutDuringValueLogGC")

// gcPoints are the named power-cut points of a value-log GC, each armed
// when Badger logs that it begins to rewrite a value-log file (gcBegins)
// and cutting at one of the next syncs of its kind (one at random among
// the first upTo): then the GC is rewriting the file, or collectValueLog
// is syncing the values it moved (every value-log file, then the data
// directory), or checkpointing Badger (the memtables' logs, db.Sync, the
// directory, the mark), while the rewritten file waits for the iterator
// it holds to be closed before Badger deletes it. The commits of the
// clients go on meanwhile, so their syncs are among the "any" point's.
var gcPoints = []logPoint{
	{SyncPoint: faultfs.SyncPoint{Name: "at any sync once a value-log GC began",
		Match: func(string) bool { return true }}, upTo: 12, fill: true, churn: true, afterLog: gcBegins, doneLog: gcDone},
	{SyncPoint: faultfs.SyncPoint{Name: "at a value-log file's sync once a value-log GC began",
		Match: func(n string) bool { return strings.HasSuffix(n, ".vlog") }}, upTo: 4, fill: true, churn: true, afterLog: gcBegins, doneLog: gcDone},
	{SyncPoint: faultfs.SyncPoint{Name: "at a memtable log's sync once a value-log GC began",
		Match: func(n string) bool { return strings.HasSuffix(n, ".mem") }}, upTo: 2, fill: true, churn: true, afterLog: gcBegins, doneLog: gcDone},
	// faultfs names the data directory (the mount's root) after the
	// backing directory, "backing" in runPowerCutAt.
	{SyncPoint: faultfs.SyncPoint{Name: "right after the data directory's sync once a value-log GC began", After: true,
		Match: func(n string) bool { return n == "backing" }}, upTo: 2, fill: true, churn: true, afterLog: gcBegins, doneLog: gcDone},
}

// TestPowerCutDuringValueLogGC cuts the power while savepointd's value-log
// GC is in progress, at each of gcPoints in turn. savepointd is the
// smallvlog fault build (1 MiB value-log files) with a maintenance
// pass every second that keeps each session's last revision
// (--retain-revisions 1), so the clients' saves, whose messages over 512
// bytes go to the value log, leave garbage for the GC to collect, and a
// filler makes memtable flushes so that the pass's compaction sees it. No
// acknowledged write may be lost, torn or unreadable (a revision older than
// a session's last may be pruned, but reads exactly if read), no restart
// may be refused, and the run fails unless Badger ended a value-log
// rewrite and at least half as many cuts as gcPoints has (2) came while a
// GC was in progress.
// Values a GC moved that the cut lost are written back at the restart
// from the file the GC collected (defect 18 of docs/reliability.md,
// daemon/badgerstore/gc_recover.go). make test runs 4 cuts, make
// powerloss-gc CYCLES=N more.
func TestPowerCutDuringValueLogGC(t *testing.T) {
	if *flagGCCycles == 0 {
		t.Skip("-powercut-gc-cycles=0")
	}
	bin := daemontest.BuildFaults(t, "smallvlog")
	cfg := crashConfig{cycles: *flagGCCycles, clients: 4, seed: *flagSeed, maxLoad: *flagMaxLoad, retain: 1, verifyEach: true,
		args: []string{"--gc-interval", "1s", "--retain-revisions", "1", "--log-level", "debug"}}
	rep := runPowerCutAt(t, bin, cfg, gcPoints)
	fmt.Printf("power cut during value-log GC: %s cuts-during-a-gc=%d gc-rewrites-begun=%d gc-rewrites-ended=%d gc-rewrites-reported=%d moved-values-written-back=%d moved-values-without-a-copy=%d\n",
		rep.line(), rep.inProgress, rep.gcBegun, rep.gcRewritten, rep.gcDone, rep.writtenBack, rep.noCopy)
	if rep.lost+rep.torn+rep.unread > 0 || rep.unexpected > 0 || rep.acked == 0 || rep.refused > 0 || rep.noCopy > 0 {
		t.Fatalf("%s unexpected=%d", rep.line(), rep.unexpected)
	}
	// Within one store GCs become rarer after a few cuts (a long run's later
	// cycles may see none), so the bar is half of the first len(gcPoints).
	if rep.gcRewritten == 0 || rep.inProgress < (min(cfg.cycles, len(gcPoints))+1)/2 {
		t.Fatalf("Badger's value-log GC began %d rewrites and ended %d, and %d of %d cuts came while one was in progress: the test reached too little",
			rep.gcBegun, rep.gcRewritten, rep.inProgress, cfg.cycles)
	}
}
