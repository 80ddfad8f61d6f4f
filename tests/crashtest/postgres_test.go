package crashtest

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The PostgreSQL crash tests' short forms run in `go test ./...` (make
// test); make crashtest-postgres passes more cycles and rounds.
var (
	flagPGCycles     = flag.Int("pg-cycles", 2, "fault cycles of each PostgreSQL crash test (make crashtest-postgres: PG_CYCLES)")
	flagPGClients    = flag.Int("pg-clients", 8, "concurrent clients of the PostgreSQL crash tests")
	flagPGRaceRounds = flag.Int("pg-race-rounds", 50, "rounds of the two-daemon resume race (make crashtest-postgres: PG_RACE_ROUNDS)")
)

// pgFault is one kind of fault the PostgreSQL crash driver injects while the
// clients load the daemon.
type pgFault struct {
	// crash makes the fault happen; the load stops with it.
	crash func()
	// down, when set, runs while the fault holds, before recover.
	down func(c savepointv1.SavepointServiceClient)
	// recover ends the fault and returns the client through which the
	// in-flight writes are resolved and the acknowledged ones read back.
	recover func() savepointv1.SavepointServiceClient
	// after, when set, runs once the writes are read back and every
	// session resumed; epochs holds each session's epoch before the resume.
	after func(c savepointv1.SavepointServiceClient, epochs map[*session]uint64)
}

// runPGCrash is runCrash's loop with the fault supplied: cycles times it
// loads the daemon with clients clients through load(), makes the fault
// happen, recovers, resolves the writes in flight (retrying each with the
// same request id), reads back every write acknowledged since the last
// cycle and resumes every session; at the end it reads back every write
// acknowledged in the run, through the client of the last recover.
func runPGCrash(t *testing.T, cfg crashConfig, load func() savepointv1.SavepointServiceClient, f pgFault) (crashReport, savepointv1.SavepointServiceClient) {
	t.Helper()
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	t.Logf("PostgreSQL crash driver: %d cycles, %d clients, seed %d (rerun with -seed=%d)", cfg.cycles, cfg.clients, cfg.seed, cfg.seed)
	begin := time.Now()
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
	var c savepointv1.SavepointServiceClient
	for cycle := 1; cycle <= cfg.cycles; cycle++ {
		c = load()
		var stop atomic.Bool
		acked0 := h.tally.acked.Load()
		// At least a third of maxLoad, so that every cycle has writes.
		loadFor := cfg.maxLoad/3 + time.Duration(rng.Int64N(int64(cfg.maxLoad)*2/3))
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); w.load(c, &stop) }()
		}
		time.Sleep(loadFor)
		f.crash()
		stop.Store(true)
		wg.Wait()
		inFlight := 0
		for _, w := range workers {
			if w.inDoubt != nil {
				inFlight++
			}
		}
		if f.down != nil {
			f.down(c)
		}
		c = f.recover()
		t0 := time.Now()
		all(func(w *worker) { w.resolve(c) })
		all(func(w *worker) { w.verifyAcks(c) })
		epochs := map[*session]uint64{}
		for _, w := range workers {
			for _, s := range w.sessions {
				epochs[s] = s.epoch
			}
		}
		all(func(w *worker) { w.resume(c) })
		if f.after != nil {
			f.after(c, epochs)
		}
		lost, torn, unread := h.tally.counts()
		t.Logf("cycle %d/%d: fault after %v of load, %d writes acknowledged, %d in flight; resolved, read back and resumed in %v (lost=%d torn=%d unreadable=%d so far)",
			cycle, cfg.cycles, loadFor.Round(time.Millisecond), h.tally.acked.Load()-acked0, inFlight,
			time.Since(t0).Round(time.Millisecond), lost, torn, unread)
	}
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
	for _, n := range h.tally.notes {
		t.Log(n)
	}
	lost, torn, unread := h.tally.counts()
	return crashReport{
		cycles: cfg.cycles, acked: h.tally.acked.Load(), lost: lost, torn: torn, unread: unread,
		inDoubt: h.tally.inDoubt.Load(), hadApplied: h.tally.hadApplied.Load(), unexpected: h.tally.unexpected.Load(),
		elapsed: time.Since(begin),
	}, c
}

// checkReport fails the test on any lost, torn or unreadable write, any
// unexpected answer, or a run without acknowledged writes.
func checkReport(t *testing.T, what string, rep crashReport) {
	t.Helper()
	t.Logf("%d in doubt at a fault (%d had been applied before the retry), %d unexpected answers, %v",
		rep.inDoubt, rep.hadApplied, rep.unexpected, rep.elapsed.Round(time.Millisecond))
	fmt.Printf("%s: %s\n", what, rep.line())
	if rep.lost+rep.torn+rep.unread > 0 || rep.unexpected > 0 || rep.acked == 0 {
		t.Fatalf("%s: %s unexpected=%d", what, rep.line(), rep.unexpected)
	}
}

// pgProc is a savepointd child process on a PostgreSQL database.
func pgProc(t *testing.T, url string) *proc {
	p := newProc(t, binary(t, false), "--store-url", url)
	p.mustStart()
	return p
}

// TestPostgresCrashDurability is TestCrashDurability with PostgreSQL as the
// store: savepointd is killed with SIGKILL under concurrent clients and
// restarted, and nothing it acknowledged is lost, torn or unreadable.
func TestPostgresCrashDurability(t *testing.T) {
	srv := pgtest.New(t)
	url := srv.URL(srv.NewDatabase(t))
	p := pgProc(t, url)
	cfg := crashConfig{cycles: *flagPGCycles, clients: *flagPGClients, seed: *flagSeed, maxLoad: *flagMaxLoad, big: true}
	rep, _ := runPGCrash(t, cfg, func() savepointv1.SavepointServiceClient { return p.client }, pgFault{
		crash: p.kill,
		recover: func() savepointv1.SavepointServiceClient {
			if err := p.start(); err != nil {
				t.Fatal(err)
			}
			return p.client
		},
	})
	if code := p.stop(); code != 0 {
		t.Errorf("savepointd exited %d on SIGTERM:\n%s", code, lastLines(p.stderr.String(), 20))
	}
	if code, out, errOut := runBin(p.bin, "verify", "--data-dir", t.TempDir(), "--store-url", url); code != 0 {
		t.Errorf("savepointd verify exited %d: %s %s", code, out, errOut)
	}
	checkReport(t, "postgres, kill -9 of savepointd", rep)
}

// TestPostgresImmediateShutdown stops PostgreSQL itself with an immediate
// shutdown (pg_ctl stop -m immediate) while concurrent clients write through
// savepointd, checks that calls are UNAVAILABLE while it is down, restarts
// it (crash recovery replays the WAL) and reads back every acknowledged
// write through the same, never restarted, savepointd.
//
// What it proves: savepointd acknowledges a write only once PostgreSQL has
// committed it to the WAL (with fsync on, as in production), a commit cut
// off by the shutdown is answered as UNAVAILABLE and settled by a retry with
// the same request id, and the pool reconnects after the restart. What it
// does not prove: an immediate shutdown keeps the OS page cache, so a write
// PostgreSQL had written but not yet fsynced survives it too; losing power
// (or a kernel crash) is not simulated, and PostgreSQL's own fsync
// discipline is taken on trust here.
func TestPostgresImmediateShutdown(t *testing.T) {
	srv := pgtest.NewDurable(t)
	p := pgProc(t, srv.URL(srv.NewDatabase(t)))
	unavailable := 0
	cfg := crashConfig{cycles: *flagPGCycles, clients: *flagPGClients, seed: *flagSeed, maxLoad: *flagMaxLoad}
	rep, _ := runPGCrash(t, cfg, func() savepointv1.SavepointServiceClient { return p.client }, pgFault{
		crash: func() { srv.Crash(t) },
		down: func(c savepointv1.SavepointServiceClient) {
			ctx, cancel := ctxT()
			defer cancel()
			_, errSave := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "while-down", Task: "t"})
			_, errGet := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "c00-1"})
			for _, err := range []error{errSave, errGet} {
				if status.Code(err) != codes.Unavailable {
					t.Errorf("a call with PostgreSQL down: %v, want UNAVAILABLE", err)
				} else {
					unavailable++
				}
			}
		},
		recover: func() savepointv1.SavepointServiceClient {
			if err := srv.StartServer(); err != nil {
				t.Fatal(err)
			}
			return p.client
		},
	})
	if !p.running() {
		t.Fatalf("savepointd exited while PostgreSQL was down:\n%s", lastLines(p.stderr.String(), 20))
	}
	ctx, cancel := ctxT()
	defer cancel()
	if _, err := p.client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "while-down"}); !notFound(err) {
		t.Errorf("the save refused while PostgreSQL was down: GetSession answers %v, want NOT_FOUND", err)
	}
	t.Logf("%d probe calls with PostgreSQL down answered UNAVAILABLE", unavailable)
	checkReport(t, "postgres, pg_ctl stop -m immediate", rep)
}

// TestPostgresTwoDaemonsKill runs two savepointd, A and B, on one PostgreSQL
// database, as two hosts of a fleet. Concurrent clients write through A
// until A is killed with SIGKILL; then every write A acknowledged is read
// back through B, the writes in flight are settled through B with the same
// request ids, and every session is resumed on B. A is restarted, and each
// session's epoch from before B's resume is fenced on A (SESSION_FENCED,
// changing nothing) before the next cycle loads A again.
func TestPostgresTwoDaemonsKill(t *testing.T) {
	srv := pgtest.New(t)
	db := srv.NewDatabase(t)
	a := pgProc(t, srv.URL(db))
	b := pgProc(t, srv.TCPURL(db))
	fenced := 0
	cfg := crashConfig{cycles: *flagPGCycles, clients: 8, seed: *flagSeed, maxLoad: *flagMaxLoad, big: true}
	rep, _ := runPGCrash(t, cfg, func() savepointv1.SavepointServiceClient { return a.client }, pgFault{
		crash:   a.kill,
		recover: func() savepointv1.SavepointServiceClient { return b.client },
		after: func(c savepointv1.SavepointServiceClient, epochs map[*session]uint64) {
			a.mustStart()
			ctx, cancel := ctxT()
			defer cancel()
			for s, old := range epochs {
				if s.rev == 0 || old == s.epoch {
					continue // never created, or not resumed on B
				}
				_, err := a.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: s.id, ExpectedRevision: s.rev, Epoch: old,
					AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"stale"`}}})
				if status.Code(err) != codes.Aborted || reasonOf(err) != "SESSION_FENCED" {
					t.Errorf("save of %s on A with epoch %d after B resumed it at %d: %v, want ABORTED SESSION_FENCED", s.id, old, s.epoch, err)
					continue
				}
				gs, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: s.id})
				if err != nil || gs.Checkpoint.Revision != s.rev || gs.Checkpoint.Epoch != s.epoch {
					t.Errorf("after A's fenced save %s on B: %v %v, want revision %d epoch %d", s.id, gs.GetCheckpoint().GetRevision(), err, s.rev, s.epoch)
					continue
				}
				fenced++
			}
		},
	})
	t.Logf("%d stale saves on the restarted A fenced", fenced)
	if fenced == 0 {
		t.Error("no session was fenced on A")
	}
	checkReport(t, "postgres, two daemons, A killed under 8 writers, read back on B", rep)
}

// TestPostgresResumeRace races two resumers, one on each of two savepointd
// sharing one PostgreSQL database, over -pg-race-rounds rounds. Each round
// both know the session at revision r; each resumes it on its own daemon and
// saves revision r+1 with the epoch it was given, appending a message that
// names it and the round. Exactly one save must succeed, the other must be
// SESSION_FENCED or REVISION_MISMATCH, and the history at the end must hold
// exactly the winners' messages, one per round, in order.
func TestPostgresResumeRace(t *testing.T) {
	srv := pgtest.New(t)
	db := srv.NewDatabase(t)
	daemons := []*proc{pgProc(t, srv.URL(db)), pgProc(t, srv.TCPURL(db))}
	names := []string{"A", "B"}
	ctx, cancel := ctxT()
	first, err := daemons[0].client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "race", Task: "race"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	rounds := *flagPGRaceRounds
	rev := first.Revision
	var winners []int
	wins := make([]int, 2)
	losses := map[string]int{}
	for round := 1; round <= rounds; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, d := range daemons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := ctxT()
				defer cancel()
				<-start
				rr, err := d.client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "race"})
				if err != nil {
					errs[i] = fmt.Errorf("Resume: %w", err)
					return
				}
				_, errs[i] = d.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "race", ExpectedRevision: rev, Epoch: rr.Epoch,
					AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: fmt.Sprintf(`{"round":%d,"by":%q}`, round, names[i])}}})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch r := reasonOf(err); {
			case err == nil && winner == -1:
				winner = i
			case err == nil:
				t.Fatalf("round %d: both saves succeeded", round)
			case status.Code(err) == codes.Aborted && (r == "SESSION_FENCED" || r == "REVISION_MISMATCH"):
				losses[r]++
			default:
				t.Fatalf("round %d: %s: %v (reason %q), want success or ABORTED SESSION_FENCED/REVISION_MISMATCH", round, names[i], err, r)
			}
		}
		if winner == -1 {
			t.Fatalf("round %d: neither save succeeded: %v", round, errs)
		}
		winners = append(winners, winner)
		wins[winner]++
		rev++
	}

	// The history: one message per round, by that round's winner, read back
	// through each daemon.
	for _, d := range daemons {
		ctx, cancel := ctxT()
		cp, msgs, err := readRevision(ctx, d.client, "race", rev)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if cp.Revision != rev || len(msgs) != rounds {
			t.Fatalf("the session is at revision %d with %d messages, want %d with %d", cp.Revision, len(msgs), rev, rounds)
		}
		for i, m := range msgs {
			if want := fmt.Sprintf(`{"round":%d,"by":%q}`, i+1, names[winners[i]]); m.ContentJson != want {
				t.Fatalf("message %d is %s, want %s: the histories interleave", i, m.ContentJson, want)
			}
		}
	}
	t.Logf("%d rounds: A won %d, B won %d; the losers got SESSION_FENCED %d times, REVISION_MISMATCH %d times",
		rounds, wins[0], wins[1], losses["SESSION_FENCED"], losses["REVISION_MISMATCH"])
	fmt.Printf("postgres resume race: rounds=%d winners=%d (A %d, B %d) losers-fenced=%d losers-revision-mismatch=%d\n",
		rounds, len(winners), wins[0], wins[1], losses["SESSION_FENCED"], losses["REVISION_MISMATCH"])
}

// reasonOf returns the ErrorInfo reason of err, or "".
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(interface{ GetReason() string }); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestPostgresCrashDriverDetectsLoss is the proof that the PostgreSQL crash
// driver can fail: A is killed under load as in TestPostgresTwoDaemonsKill,
// and before the read-back through B the store's tables are emptied behind
// both daemons' backs (a store that lost what it acknowledged). The driver
// must report the acknowledged writes as lost.
func TestPostgresCrashDriverDetectsLoss(t *testing.T) {
	srv := pgtest.New(t)
	db := srv.NewDatabase(t)
	a := pgProc(t, srv.URL(db))
	b := pgProc(t, srv.TCPURL(db))
	cfg := crashConfig{cycles: 1, clients: 4, seed: *flagSeed, maxLoad: 400 * time.Millisecond, broken: true}
	rep, _ := runPGCrash(t, cfg, func() savepointv1.SavepointServiceClient { return a.client }, pgFault{
		crash: a.kill,
		recover: func() savepointv1.SavepointServiceClient {
			srv.Exec(t, db, "TRUNCATE savepoint.sessions, savepoint.revisions, savepoint.messages, savepoint.calls, savepoint.requests")
			return b.client
		},
	})
	fmt.Printf("postgres, tables emptied after the kill: %s\n", rep.line())
	if rep.acked == 0 || rep.lost == 0 {
		t.Fatalf("the driver did not detect the loss of every acknowledged write: %s", rep.line())
	}
}
