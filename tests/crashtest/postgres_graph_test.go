package crashtest

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// checkGraphReport fails the test on any lost or torn graph write, any
// unexpected answer, or a run without acknowledged writes.
func checkGraphReport(t *testing.T, what string, rep graphReport) {
	t.Helper()
	fmt.Printf("%s: %s\n", what, rep.line())
	if rep.lost > 0 || rep.unexpected > 0 || rep.acked == 0 {
		t.Fatalf("%s: %s unexpected=%d: %v", what, rep.line(), rep.unexpected, rep.notes)
	}
}

// TestPostgresGraphCrashDurability is TestGraphCrashDurability with
// PostgreSQL as the store: savepointd is killed with SIGKILL under
// concurrent graph writers (checkpoints with blobs, pending writes,
// special-index upserts, streamed uploads of several MiB, thread deletes)
// and restarted; every write in flight is retried with its request id, and
// every acknowledged write is read back byte for byte.
func TestPostgresGraphCrashDurability(t *testing.T) {
	srv := pgtest.New(t)
	url := srv.URL(srv.NewDatabase(t))
	p := pgProc(t, url)
	rep := runGraphFaults(t, p, *flagPGCycles, *flagPGClients, *flagSeed, graphFault{crash: p.kill, recover: func() *proc {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		return p
	}})
	if code := p.stop(); code != 0 {
		t.Errorf("savepointd exited %d on SIGTERM:\n%s", code, lastLines(p.stderr.String(), 20))
	}
	if code, out, errOut := runBin(p.bin, "verify", "--data-dir", t.TempDir(), "--store-url", url); code != 0 {
		t.Errorf("savepointd verify exited %d: %s %s", code, out, errOut)
	}
	checkGraphReport(t, "postgres, graph, kill -9 of savepointd", rep)
}

// TestPostgresGraphImmediateShutdown stops PostgreSQL with an immediate
// shutdown (pg_ctl stop -m immediate) under concurrent graph writers,
// checks that graph calls are UNAVAILABLE while it is down, restarts it and
// reads back every acknowledged graph write through the same, never
// restarted, savepointd. It proves what TestPostgresImmediateShutdown
// proves, for the graph service, and no more (the OS page cache survives).
func TestPostgresGraphImmediateShutdown(t *testing.T) {
	srv := pgtest.NewDurable(t)
	p := pgProc(t, srv.URL(srv.NewDatabase(t)))
	unavailable := 0
	rep := runGraphFaults(t, p, *flagPGCycles, *flagPGClients, *flagSeed, graphFault{
		crash: func() { srv.Crash(t) },
		down: func(g savepointv1.GraphCheckpointServiceClient) {
			ctx, cancel := ctxT()
			defer cancel()
			_, errPut := g.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{
				ThreadId: "while-down", CheckpointId: "1", MetadataJson: `{}`}})
			_, errGet := graphtest.Get(ctx, g, &savepointv1.GetCheckpointRequest{ThreadId: "while-down"}, 0)
			for _, err := range []error{errPut, errGet} {
				if status.Code(err) != codes.Unavailable {
					t.Errorf("a graph call with PostgreSQL down: %v, want UNAVAILABLE", err)
				} else {
					unavailable++
				}
			}
		},
		recover: func() *proc {
			if err := srv.StartServer(); err != nil {
				t.Fatal(err)
			}
			return p
		},
	})
	if !p.running() {
		t.Fatalf("savepointd exited while PostgreSQL was down:\n%s", lastLines(p.stderr.String(), 20))
	}
	ctx, cancel := ctxT()
	defer cancel()
	if tp, err := graphtest.Get(ctx, savepointv1.NewGraphCheckpointServiceClient(p.conn), &savepointv1.GetCheckpointRequest{ThreadId: "while-down"}, 0); err != nil || tp != nil {
		t.Errorf("the put refused while PostgreSQL was down: GetCheckpoint answers %v %v, want none", tp, err)
	}
	t.Logf("%d probe calls with PostgreSQL down answered UNAVAILABLE", unavailable)
	checkGraphReport(t, "postgres, graph, pg_ctl stop -m immediate", rep)
}

// TestPostgresGraphCrashDetectsLoss is the proof that the graph harness on
// PostgreSQL can fail: savepointd is killed under load, and before it
// restarts the graph tables are emptied behind its back (a store that lost
// what it acknowledged). The harness must report the writes as lost.
func TestPostgresGraphCrashDetectsLoss(t *testing.T) {
	srv := pgtest.New(t)
	db := srv.NewDatabase(t)
	p := pgProc(t, srv.URL(db))
	rep := runGraphFaults(t, p, 1, 4, *flagSeed, graphFault{crash: p.kill, recover: func() *proc {
		srv.Exec(t, db, "TRUNCATE savepoint.graph_threads, savepoint.graph_checkpoints, savepoint.graph_blobs, savepoint.graph_writes, savepoint.graph_requests")
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		return p
	}})
	fmt.Printf("postgres, graph tables emptied after the kill: %s\n", rep.line())
	if rep.acked == 0 || rep.lost == 0 {
		t.Fatalf("the graph harness did not detect the loss of the acknowledged writes: %s", rep.line())
	}
}
