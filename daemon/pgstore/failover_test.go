package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// proxied opens a store on srv through a fault proxy, over loopback TCP.
func proxied(t *testing.T, srv *pgtest.Server, opts ...func(*pgstore.Options)) (*pgstore.Store, *pgtest.Proxy) {
	t.Helper()
	p := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	return open(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port), newSchema(), opts...), p
}

func requestID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// checkCut fails the test unless the proxy made the cut it was armed with.
func checkCut(t *testing.T, p *pgtest.Proxy, want pgtest.Cut) {
	t.Helper()
	select {
	case c := <-p.Fired():
		if c != want {
			t.Fatalf("the proxy cut %v, want %v", c, want)
		}
	default:
		t.Fatalf("the proxy did not cut %v", want)
	}
}

// TestProxyCutsSave: a save with a request id whose connection is cut at
// each moment. On a session this store did not write last (its rows read
// ahead, two round trips): before a statement (an idle connection found
// dead) it is retried on another connection and succeeds; mid-transaction
// it fails UNAVAILABLE and nothing was committed; with COMMIT sent and its
// answer lost it fails COMMIT_OUTCOME_UNKNOWN, committed or not. On a
// session it wrote last (headcache.go: BEGIN to COMMIT in one round
// trip), COMMIT goes with the first statement, so a cut of that one round
// trip is COMMIT_OUTCOME_UNKNOWN, unless only statements being prepared
// were lost (then it is retried). The retry with the same request id then
// makes exactly one revision, whichever happened.
func TestProxyCutsSave(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	p := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	s := open(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port), schema)
	other := open(t, srv.URL("postgres"), schema)
	for i, tc := range []struct {
		cut       pgtest.Cut
		cached    bool  // the session was written last by s
		want      error // nil: the save succeeds
		committed bool
		orRetried bool // or, cached, it is retried and succeeds
	}{
		{pgtest.CutBeforeStatement, false, nil, true, false},
		{pgtest.CutMidTransaction, false, core.ErrUnavailable, false, false},
		{pgtest.CutBeforeCommit, false, core.ErrCommitOutcomeUnknown, false, false},
		{pgtest.CutAfterCommit, false, core.ErrCommitOutcomeUnknown, true, false},
		{pgtest.CutBeforeStatement, true, core.ErrCommitOutcomeUnknown, false, true},
		{pgtest.CutBeforeCommit, true, core.ErrCommitOutcomeUnknown, false, false},
		{pgtest.CutAfterCommit, true, core.ErrCommitOutcomeUnknown, true, false},
	} {
		t.Run(fmt.Sprintf("%v/cached=%v", tc.cut, tc.cached), func(t *testing.T) {
			id := fmt.Sprint("s", i)
			creator := other
			if tc.cached {
				creator = s
			}
			if _, err := creator.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id}); err != nil {
				t.Fatal(err)
			}
			req := &core.SaveRequest{SessionID: id, ExpectedRevision: 1, RequestID: requestID(i),
				AppendMessages: []core.Message{{Role: "user", ContentJSON: `"once"`}}}
			p.Arm(tc.cut)
			res, err := s.SaveCheckpoint(ctx, req)
			checkCut(t, p, tc.cut)
			if tc.orRetried && err == nil {
				tc.want, tc.committed = nil, true
			}
			switch {
			case tc.want == nil && (err != nil || res.Revision != 2):
				t.Fatalf("save: %+v %v, want revision 2", res, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("save: %v, want %v", err, tc.want)
			case tc.want == core.ErrUnavailable && errors.Is(err, core.ErrCommitOutcomeUnknown):
				t.Fatalf("save: %v; nothing was committed, so the outcome is known", err)
			}
			cp, err := s.Checkpoint(ctx, id, 0)
			if wantRev := map[bool]uint64{true: 2, false: 1}[tc.committed]; err != nil || cp.Revision != wantRev {
				t.Fatalf("after the cut the session is at %+v %v, want revision %d", cp, err, wantRev)
			}
			// The client's retry, with the same request id.
			res, err = s.SaveCheckpoint(ctx, req)
			if err != nil || res.Revision != 2 {
				t.Fatalf("retry: %+v %v, want revision 2", res, err)
			}
			cp, err = s.Checkpoint(ctx, id, 0)
			if err != nil || cp.Revision != 2 || cp.MessageCount != 1 {
				t.Fatalf("after the retry: %+v %v, want revision 2 with one message", cp, err)
			}
		})
	}
}

// TestProxyCutAfterCommitEffects: BeginEffect and RecordEffect whose
// COMMIT's answer is lost fail COMMIT_OUTCOME_UNKNOWN; their retries (the
// same tool use id) answer what was stored, the same idempotency key and
// the same record, and the ledger holds one begin and one record.
func TestProxyCutAfterCommitEffects(t *testing.T) {
	s, p := proxied(t, pgtest.Shared(t))
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "e",
		PendingToolUses: []core.ToolUse{{ID: "u1", Name: "pay", InputJSON: `{}`, Class: core.SideEffect}}}); err != nil {
		t.Fatal(err)
	}
	p.Arm(pgtest.CutAfterCommit)
	if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "e", ToolUseID: "u1", Epoch: 0}); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("BeginEffect: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "e", ToolUseID: "u1", Epoch: 0})
	if err != nil || b.IdempotencyKey == "" {
		t.Fatalf("BeginEffect's retry: %+v %v", b, err)
	}
	ledger, err := s.Effects(ctx, "e", "", 10)
	if err != nil || len(ledger) != 1 || !ledger[0].Begun || ledger[0].IdempotencyKey != b.IdempotencyKey {
		t.Fatalf("ledger after the begin: %+v %v, want u1 begun with key %q", ledger, err, b.IdempotencyKey)
	}
	p.Arm(pgtest.CutAfterCommit)
	e := core.Effect{ToolUseID: "u1", Name: "pay", Output: `"paid"`}
	if _, _, err := s.RecordEffect(ctx, "e", e); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("RecordEffect: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	stored, already, err := s.RecordEffect(ctx, "e", e)
	if err != nil || !already || stored.Output != e.Output {
		t.Fatalf("RecordEffect's retry: %+v already=%v %v, want the stored record", stored, already, err)
	}
	ledger, err = s.Effects(ctx, "e", "", 10)
	if err != nil || len(ledger) != 1 || ledger[0].Effect == nil || ledger[0].Effect.Output != e.Output {
		t.Fatalf("ledger after the record: %+v %v", ledger, err)
	}
}

// TestProxyCutAfterCommitBeginRequestID: a BeginEffect with a request id
// (AIP-155), a RecordEffect with one and a BeginThreadEffect with one,
// whose COMMIT's answer is lost, fail COMMIT_OUTCOME_UNKNOWN; the retry
// with the same request id gets the first answer (not already begun, not
// already recorded; for the thread, RUN with attempt 1), though the write
// had landed, and the ledger holds one begin.
// A retry without the request id can only say already begun.
func TestProxyCutAfterCommitBeginRequestID(t *testing.T) {
	s, p := proxied(t, pgtest.Shared(t))
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "e",
		PendingToolUses: []core.ToolUse{{ID: "u1", Name: "pay", InputJSON: `{}`, Class: core.SideEffect}}}); err != nil {
		t.Fatal(err)
	}
	begin := &core.BeginRequest{SessionID: "e", ToolUseID: "u1", RequestID: requestID(40)}
	p.Arm(pgtest.CutAfterCommit)
	if _, err := s.BeginEffect(ctx, begin); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("BeginEffect: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	b, err := s.BeginEffect(ctx, begin)
	if err != nil || b.AlreadyBegun || b.IdempotencyKey == "" {
		t.Fatalf("BeginEffect's retry with its request id: %+v %v, want the first answer, not already begun", b, err)
	}
	if again, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "e", ToolUseID: "u1"}); err != nil || !again.AlreadyBegun || again.IdempotencyKey != b.IdempotencyKey {
		t.Fatalf("a retry without the request id: %+v %v, want already begun with key %q", again, err, b.IdempotencyKey)
	}
	ledger, err := s.Effects(ctx, "e", "", 10)
	if err != nil || len(ledger) != 1 || !ledger[0].Begun || ledger[0].IdempotencyKey != b.IdempotencyKey {
		t.Fatalf("ledger after the begin: %+v %v, want u1 begun once with key %q", ledger, err, b.IdempotencyKey)
	}

	rec := core.Effect{ToolUseID: "u1", Name: "pay", Output: `"paid"`, RequestID: requestID(42)}
	p.Arm(pgtest.CutAfterCommit)
	if _, _, err := s.RecordEffect(ctx, "e", rec); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("RecordEffect: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	stored, already, err := s.RecordEffect(ctx, "e", rec)
	if err != nil || already || stored.Output != rec.Output {
		t.Fatalf("RecordEffect's retry with its request id: %+v already=%v %v, want the first answer, not already recorded", stored, already, err)
	}

	tb := effectBegin("th", "call")
	tb.RequestID = requestID(41)
	p.Arm(pgtest.CutAfterCommit)
	if _, err := s.BeginThreadEffect(ctx, tb); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("BeginThreadEffect: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	r, err := s.BeginThreadEffect(ctx, tb)
	if err != nil || r.Decision != core.DecisionRun || r.Effect.Attempts != 1 {
		t.Fatalf("BeginThreadEffect's retry with its request id: %+v %v, want RUN, attempt 1", r, err)
	}
	again := *tb
	again.RequestID = ""
	if r, err := s.BeginThreadEffect(ctx, &again); err != nil || r.Decision == core.DecisionRun {
		t.Fatalf("a begin of the thread's call without the request id: %+v %v, want it not run again", r, err)
	}
}

// TestProxyCutAfterCommitGraph: a graph put and a graph write whose
// COMMIT's answer is lost fail COMMIT_OUTCOME_UNKNOWN; their retries with
// the same request id are answered as already applied, and nothing is
// stored twice.
func TestProxyCutAfterCommitGraph(t *testing.T) {
	s, p := proxied(t, pgtest.Shared(t))
	put := graphPut("g", "1")
	put.RequestID = requestID(100)
	p.Arm(pgtest.CutAfterCommit)
	if _, err := s.PutCheckpoint(ctx, put); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("PutCheckpoint: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	if already, err := s.PutCheckpoint(ctx, put); err != nil || !already {
		t.Fatalf("PutCheckpoint's retry: already=%v %v, want already applied", already, err)
	}
	w := &core.GraphWrites{ThreadID: "g", CheckpointID: "1", TaskID: "task", RequestID: requestID(101),
		Writes: []core.GraphWrite{{Idx: 0, Channel: "a", Value: core.GraphValue{Type: "json", Data: []byte(`1`), Size: 1}}}}
	p.Arm(pgtest.CutAfterCommit)
	if _, err := s.PutWrites(ctx, w); !errors.Is(err, core.ErrCommitOutcomeUnknown) {
		t.Fatalf("PutWrites: %v, want COMMIT_OUTCOME_UNKNOWN", err)
	}
	checkCut(t, p, pgtest.CutAfterCommit)
	if res, err := s.PutWrites(ctx, w); err != nil || !res.AlreadyApplied {
		t.Fatalf("PutWrites' retry: %+v %v, want already applied", res, err)
	}
	if tp, err := latest(t, s, "g"); err != nil || tp == nil || tp.Checkpoint.ID != "1" || len(tp.Writes) != 1 {
		t.Fatalf("the thread after the retries: %+v %v, want checkpoint 1 with one write", tp, err)
	}
}

// TestProxyLatencyAndRefusal: latency slows the store without failing it;
// latency past the statement timeout fails a save UNAVAILABLE within its
// bound rather than blocking; refused connections fail it UNAVAILABLE,
// and once the proxy serves again the same store writes, without a
// restart.
func TestProxyLatencyAndRefusal(t *testing.T) {
	s, p := proxied(t, pgtest.Shared(t), func(o *pgstore.Options) { o.StatementTimeout = time.Second })
	save := func(id string) error {
		_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id})
		return err
	}
	p.SetLatency(20 * time.Millisecond)
	if err := save("slow"); err != nil {
		t.Fatalf("save with 20ms latency each way: %v", err)
	}
	p.SetLatency(3 * time.Second)
	start := time.Now()
	err := save("stuck")
	if elapsed := time.Since(start); !errors.Is(err, core.ErrUnavailable) || elapsed > 10*time.Second {
		t.Fatalf("save with 3s latency and a 1s statement timeout: %v after %v, want UNAVAILABLE within 10s", err, elapsed)
	}
	p.SetLatency(0)
	p.Refuse(true)
	p.CutAll()
	start = time.Now()
	err = save("refused")
	if elapsed := time.Since(start); !errors.Is(err, core.ErrUnavailable) || elapsed > 10*time.Second {
		t.Fatalf("save while connections are refused: %v after %v, want UNAVAILABLE within 10s", err, elapsed)
	}
	if err := s.Reachable(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Reachable while connections are refused: %v", err)
	}
	p.Refuse(false)
	if err := save("back"); err != nil {
		t.Fatalf("save once the proxy serves again: %v", err)
	}
}

// TestFailoverReconnect: a store on a multi-host URL with
// target_session_attrs=read-write, on a primary and its synchronous
// standby. When the primary dies, writes fail NO_WRITABLE_HOST within the
// statement timeout, reads are served by the standby, and Reachable fails
// (health NOT_SERVING); once the standby is promoted and has the old
// primary as its standby, the same store writes to it, without a restart,
// and what was acknowledged is there.
func TestFailoverReconnect(t *testing.T) {
	primary := pgtest.New(t)
	if err := primary.Replicated(true); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.NewStandby()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Remove)
	if err := primary.WaitSyncStandby(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A URL of the standby alone: its writes (Open's migration) are
	// refused read-only, NO_WRITABLE_HOST.
	if s, err := pgstore.Open(ctx, standby.URL("postgres"), pgstore.Options{Schema: newSchema()}); !errors.Is(err, core.ErrNoWritableHost) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open on the standby: %v, want NO_WRITABLE_HOST", err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port, standby.Port)
	s := open(t, url, newSchema(), func(o *pgstore.Options) { o.StatementTimeout = 2 * time.Second })
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "f", RequestID: requestID(1),
		AppendMessages: []core.Message{{Role: "user", ContentJSON: `"before"`}}}); err != nil {
		t.Fatal(err)
	}
	// The read below comes from the standby: it must have applied, not
	// only flushed, what the primary acknowledged.
	if err := primary.WaitReplayed(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := primary.Kill(true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "f", ExpectedRevision: 1, RequestID: requestID(2)})
	if elapsed := time.Since(start); !errors.Is(err, core.ErrNoWritableHost) || elapsed > 15*time.Second {
		t.Fatalf("save with the primary down: %v after %v, want NO_WRITABLE_HOST within 15s", err, elapsed)
	}
	if cp, err := s.Checkpoint(ctx, "f", 0); err != nil || cp.Revision != 1 || cp.MessageCount != 1 {
		t.Fatalf("read with the primary down: %+v %v, want revision 1 from the standby", cp, err)
	}
	if err := s.Reachable(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Reachable with the primary down: %v, want UNAVAILABLE", err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	// The promoted standby keeps synchronous_standby_names: it commits
	// once the old primary streams from it, as its new standby.
	if err := primary.Follow(standby); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "f", ExpectedRevision: 1, RequestID: requestID(2),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"after"`}}})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("save after the promotion: %v", err)
	}
	if err := s.Reachable(ctx); err != nil {
		t.Fatalf("Reachable after the promotion: %v", err)
	}
	if cp, err := s.Checkpoint(ctx, "f", 0); err != nil || cp.Revision != 2 || cp.MessageCount != 2 {
		t.Fatalf("after the promotion: %+v %v, want revision 2 with both messages", cp, err)
	}
}

// TestProxySSLRequest: a client that asks for TLS first (sslmode=prefer,
// as libpq's tools do) is told no by the server through the proxy, and
// then served.
func TestProxySSLRequest(t *testing.T) {
	srv := pgtest.Shared(t)
	p := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=prefer", p.Port))
	if err != nil {
		t.Fatalf("connect with sslmode=prefer through the proxy: %v", err)
	}
	defer c.Close(ctx)
	var one int
	if err := c.QueryRow(cctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d %v", one, err)
	}
}

// TestFailoverDocURLs: the multi-host URLs of docs/operations.md's
// "Failover" parse as the doc says: every host, and a writable one asked for.
func TestFailoverDocURLs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Failover")
	if !ok {
		t.Fatal("docs/operations.md has no Failover section")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	urls := regexp.MustCompile("postgres://[^\\s`]+|host=[^`]+target_session_attrs=read-write").FindAllString(section, -1)
	if len(urls) != 2 {
		t.Fatalf("the Failover section shows %d connection strings, want the URL and the key=value form: %q", len(urls), urls)
	}
	for _, u := range urls {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if d := pgstore.Describe(cfg); !strings.Contains(d, "db1:5432,db2:5432/savepoint") || cfg.ConnConfig.ValidateConnect == nil {
			t.Errorf("%s: described as %s, with target_session_attrs %v", u, d, cfg.ConnConfig.ValidateConnect != nil)
		}
	}
}

// TestSyncCommitCancelled: a primary whose synchronous standby is gone
// waits at each COMMIT, past the statement timeout (PostgreSQL does not
// time a COMMIT); savepointd's own bound for the call then cancels the
// wait, and PostgreSQL commits locally. Every write is answered as
// committed, or COMMIT_OUTCOME_UNKNOWN (retries too, while the standby is
// gone: even a replay locks its session's row, a write that waits for the
// standby): never a failure that says nothing was written. Once the
// standby is back (here: no longer required), the retry with the same
// request id is answered as the first and the write is there once. A save
// on the cached path (headcache.go), one on the path with reads ahead (a
// second store's session), a begin with a request id and a graph put are
// tried.
func TestSyncCommitCancelled(t *testing.T) {
	srv := pgtest.New(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema, func(o *pgstore.Options) { o.StatementTimeout = time.Second })
	other := open(t, srv.URL("postgres"), schema)
	for _, id := range []string{"cached", "read"} {
		creator := s
		if id == "read" {
			creator = other
		}
		if _, err := creator.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id,
			PendingToolUses: []core.ToolUse{{ID: "u1", Name: "pay", InputJSON: `{}`, Class: core.SideEffect}}}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Exec(t, "postgres", "ALTER SYSTEM SET synchronous_standby_names = 'gone'")
	srv.Exec(t, "postgres", "SELECT pg_reload_conf()")

	var retries []func()
	try := func(what string, call func() error, after func()) {
		t.Helper()
		start := time.Now()
		err := call()
		t.Logf("%s with the synchronous standby gone: %v after %v", what, err, time.Since(start).Round(time.Millisecond))
		switch {
		case err == nil:
			after()
		case errors.Is(err, core.ErrCommitOutcomeUnknown):
			retries = append(retries, func() {
				if err := call(); err != nil {
					t.Fatalf("%s: the retry once the standby is back: %v", what, err)
				}
				after()
			})
		default:
			t.Fatalf("%s with the synchronous standby gone: %v; want it committed or %v", what, err, core.ErrCommitOutcomeUnknown)
		}
	}
	for i, id := range []string{"cached", "read"} {
		req := &core.SaveRequest{SessionID: id, ExpectedRevision: 1, Epoch: 1, RequestID: requestID(50 + i),
			AppendMessages:  []core.Message{{Role: "user", ContentJSON: `"once"`}},
			PendingToolUses: []core.ToolUse{{ID: "u1", Name: "pay", InputJSON: `{}`, Class: core.SideEffect}}}
		var res core.SaveResult
		try("save of "+id, func() error {
			var err error
			res, err = s.SaveCheckpoint(ctx, req)
			return err
		}, func() {
			cp, err := s.Checkpoint(ctx, id, 0)
			if res.Revision != 2 || err != nil || cp.Revision != 2 || cp.MessageCount != 1 {
				t.Fatalf("session %q after the save answered %+v: %+v %v; want revision 2 with one message", id, res, cp, err)
			}
		})
	}
	begin := &core.BeginRequest{SessionID: "cached", ToolUseID: "u1", RequestID: requestID(52)}
	var b core.BeginResult
	try("begin", func() error {
		var err error
		b, err = s.BeginEffect(ctx, begin)
		return err
	}, func() {
		if b.AlreadyBegun || b.IdempotencyKey == "" {
			t.Fatalf("begin: %+v, want the first begin's answer", b)
		}
	})
	put := &core.GraphPut{RequestID: requestID(53), Checkpoint: core.GraphCheckpoint{ThreadID: "th", ID: "1", MetadataJSON: `{}`,
		Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}}}
	try("graph put", func() error { _, err := s.PutCheckpoint(ctx, put); return err }, func() {})

	srv.Exec(t, "postgres", "ALTER SYSTEM RESET synchronous_standby_names")
	srv.Exec(t, "postgres", "SELECT pg_reload_conf()")
	for _, r := range retries {
		r()
	}
	if !strings.Contains(srv.Log(), "canceling wait for synchronous replication") {
		t.Fatalf("PostgreSQL did not cancel a wait for the standby; its log:\n%s", srv.Log())
	}
}
