package pgstore_test

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

var rounds = flag.Int("pg-rounds", 40, "rounds of the two-store resume race")

// TestConcurrentWriters: many writers save one session at once, each with
// the revision it last read; exactly one wins each revision, the others get
// REVISION_MISMATCH, and the history holds one message per win.
func TestConcurrentWriters(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	const writers, tries = 16, 15
	var wins, mismatches atomic.Int64
	won := make([]atomic.Int32, writers*tries+2)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				cp, err := s.Checkpoint(ctx, "s", 0)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: cp.Revision,
					AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf(`"%d.%d"`, w, i)}}})
				switch {
				case err == nil:
					wins.Add(1)
					won[res.Revision].Add(1)
				case errors.Is(err, core.ErrRevisionMismatch):
					mismatches.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cp, err := s.Checkpoint(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(wins.Load())+1 != cp.Revision || cp.MessageCount != uint64(wins.Load()) {
		t.Fatalf("%d wins, but the session is at revision %d with %d messages", wins.Load(), cp.Revision, cp.MessageCount)
	}
	for rev := uint64(2); rev <= cp.Revision; rev++ {
		if n := won[rev].Load(); n != 1 {
			t.Errorf("revision %d was won %d times", rev, n)
		}
	}
	if wins.Load()+mismatches.Load() != writers*tries || wins.Load() < 2 || mismatches.Load() == 0 {
		t.Fatalf("%d wins and %d mismatches of %d saves", wins.Load(), mismatches.Load(), writers*tries)
	}
	t.Logf("%d wins, %d revision mismatches", wins.Load(), mismatches.Load())
}

// TestTwoStoresResumeRace: two stores on one database, as two savepointd on
// two hosts, race each round to resume one session and save from the
// revision the round started at: exactly one save wins each round; the
// other is SESSION_FENCED or REVISION_MISMATCH.
func TestTwoStoresResumeRace(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	stores := []*pgstore.Store{open(t, srv.URL("postgres"), schema), open(t, srv.TCPURL("postgres"), schema)}
	if _, err := stores[0].SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	rev := uint64(1)
	var fenced, mismatched int
	for round := range *rounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cp, err := s.Resume(ctx, "s", false)
				if err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, Epoch: cp.Epoch,
					AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf(`"%d/%d"`, round, i)}}})
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for _, err := range errs {
			switch {
			case err == nil:
				winners++
			case errors.Is(err, core.ErrSessionFenced):
				fenced++
			case errors.Is(err, core.ErrRevisionMismatch):
				mismatched++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, winners, errs)
		}
		rev++
	}
	cp, err := stores[1].Checkpoint(ctx, "s", 0)
	if err != nil || cp.Revision != rev || cp.MessageCount != uint64(*rounds) || cp.Epoch != uint64(2**rounds+1) {
		t.Fatalf("after %d rounds: %+v %v", *rounds, cp, err)
	}
	t.Logf("%d rounds: the losers were fenced %d times, mismatched %d times", *rounds, fenced, mismatched)
}

// TestTwoStoresRequestIDRace: two stores on one schema, as savepointd on
// two hosts, send the same save (one request id) at once each round, as a
// client retrying on another host does: exactly one revision is made, and
// both get its answer, the loser's read of the request id under the row
// lock the winner held.
func TestTwoStoresRequestIDRace(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	stores := []*pgstore.Store{open(t, srv.URL("postgres"), schema), open(t, srv.TCPURL("postgres"), schema)}
	if _, err := stores[0].SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	rev := uint64(1)
	for round := range *rounds {
		req := &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, RequestID: fmt.Sprint("r", round),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf(`"%d"`, round)}}}
		var wg sync.WaitGroup
		res := make([]core.SaveResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i], errs[i] = s.SaveCheckpoint(ctx, req)
			}()
		}
		close(start)
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || res[0] != res[1] || res[0].Revision != rev+1 {
			t.Fatalf("round %d: %+v %v, %+v %v; want revision %d twice", round, res[0], errs[0], res[1], errs[1], rev+1)
		}
		rev++
	}
	cp, err := stores[1].Checkpoint(ctx, "s", 0)
	if err != nil || cp.Revision != rev || cp.MessageCount != uint64(*rounds) {
		t.Fatalf("after %d rounds: %+v %v", *rounds, cp, err)
	}
}

// TestRestartDurability: what was acknowledged is there after the store and
// the server restart, and verifies clean.
func TestRestartDurability(t *testing.T) {
	srv := pgtest.New(t)
	schema := newSchema()
	s, err := pgstore.Open(ctx, srv.URL("postgres"), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("s%d", i)
			rev := uint64(0)
			for j := range 10 {
				res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, ExpectedRevision: rev, Turn: uint32(j),
					AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf(`"%d"`, j)}}})
				if err != nil {
					t.Error(err)
					return
				}
				rev = res.Revision
			}
		}()
	}
	wg.Wait()
	s.Close()
	srv.StopServer()
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
	s = open(t, srv.URL("postgres"), schema)
	for i := range 8 {
		cp, err := s.Checkpoint(ctx, fmt.Sprintf("s%d", i), 0)
		if err != nil || cp.Revision != 10 || cp.MessageCount != 10 || cp.Turn != 9 {
			t.Errorf("s%d after restart: %+v %v", i, cp, err)
		}
	}
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 || rep.CheckedSessions != 8 || rep.CheckedRecords != 8*(1+10+10) {
		t.Fatalf("verify after restart: %+v %v", rep, err)
	}
}

// TestUnavailable: with the server stopped every call fails with
// ErrUnavailable, within the statement timeout, and saying why; once the
// server is back the same store serves again, without a restart.
func TestUnavailable(t *testing.T) {
	srv := pgtest.New(t)
	for _, mode := range []struct{ name, url string }{
		{"Unix", srv.URL("postgres")},
		{"TCPSimpleProtocol", srv.TCPURL("postgres", "default_query_exec_mode=simple_protocol")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := open(t, mode.url, newSchema(), func(o *pgstore.Options) { o.StatementTimeout = 2 * time.Second })
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			srv.StopServer()
			start := time.Now()
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
			if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "PostgreSQL") {
				t.Errorf("save with the server down: %v", err)
			}
			if _, err := s.Checkpoint(ctx, "s", 0); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("read with the server down: %v", err)
			}
			if _, err := s.ListSessions(ctx, "", 10, core.SessionFilter{}); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("list with the server down: %v", err)
			}
			// The group commit still answers: restarting would not help.
			if err := s.Ping(ctx); err != nil {
				t.Errorf("ping with the server down: %v", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the failed calls took %v", d)
			}
			if err := srv.StartServer(); err != nil {
				t.Fatal(err)
			}
			// The pool reconnects: the next calls succeed.
			res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
			if err != nil || res.Revision != 2 {
				t.Fatalf("save after the server is back: %+v %v", res, err)
			}
		})
	}
}

// TestStatementTimeout: a call blocked on a row lock (held here by another
// transaction) fails with ErrUnavailable once the statement timeout passes,
// in both exec modes, and the lock's release lets the next call through.
func TestStatementTimeout(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, extra := range []string{"", "default_query_exec_mode=simple_protocol"} {
		t.Run(fmt.Sprintf("mode=%q", extra), func(t *testing.T) {
			schema := newSchema()
			url := srv.URL("postgres")
			if extra != "" {
				url = srv.URL("postgres", extra)
			}
			s := open(t, url, schema, func(o *pgstore.Options) { o.StatementTimeout = time.Second })
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			c, err := pgx.Connect(ctx, srv.URL("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "sessions"}.Sanitize()+" FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
			if d := time.Since(start); !errors.Is(err, core.ErrUnavailable) || d < 900*time.Millisecond || d > 5*time.Second {
				t.Fatalf("save against a held lock: %v after %v", err, d)
			}
			if !strings.Contains(err.Error(), "statement timeout") {
				t.Errorf("the error does not name the timeout: %v", err)
			}
			tx.Rollback(ctx)
			if res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1}); err != nil || res.Revision != 2 {
				t.Fatalf("save after the lock's release: %+v %v", res, err)
			}
		})
	}
}

// TestIdleConnectionsDropped: the server (or a pooler) ends the store's idle
// connections; the next calls still succeed at the first try.
func TestIdleConnectionsDropped(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	s := open(t, srv.URL(db), newSchema())
	for i := range 4 { // several connections in the pool
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Exec(t, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db)
	time.Sleep(1100 * time.Millisecond) // idle long enough to be pinged at acquire
	for i := range 4 {
		if _, err := s.Checkpoint(ctx, fmt.Sprint(i), 0); err != nil {
			t.Fatalf("read after the connections were ended: %v", err)
		}
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprint(i), ExpectedRevision: 1}); err != nil {
			t.Fatalf("save after the connections were ended: %v", err)
		}
	}
	// Ended with no idle time: the write path retries a connection found
	// dead before anything was sent.
	srv.Exec(t, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "0", ExpectedRevision: 2}); err != nil {
		t.Fatalf("save right after the connections were ended: %v", err)
	}
}

// TestCorruptRow: a row edited outside savepointd fails its checksum: reads
// of it are CHECKPOINT_CORRUPT with the session's state, Verify names the
// session, other sessions are untouched, and the session can be deleted.
func TestCorruptRow(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	for _, id := range []string{"good", "bad", "badhead"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, Task: "t",
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hello"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Still valid JSON, so only the checksum can tell.
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "revisions"}.Sanitize()+
		` SET record = convert_to(replace(convert_from(record, 'UTF8'), '"t"', '"T"'), 'UTF8') WHERE session_id = $1`, []byte("bad"))
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "messages"}.Sanitize()+
		` SET record = convert_to(replace(convert_from(record, 'UTF8'), 'hello', 'HELLO'), 'UTF8') WHERE session_id = $1`, []byte("bad"))
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "sessions"}.Sanitize()+
		` SET checksum = checksum + 1 WHERE session_id = $1`, []byte("badhead"))

	_, err := s.Checkpoint(ctx, "bad", 0)
	var se *core.StateError
	if !errors.Is(err, core.ErrCheckpointCorrupt) || !errors.As(err, &se) || se.CurrentRevision != 1 || se.CurrentEpoch != 1 {
		t.Fatalf("tampered revision: %v", err)
	}
	if _, err := s.Messages(ctx, "bad", 0, 0, 1<<20, 0); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("messages of a tampered revision: %v", err)
	}
	if _, err := s.Checkpoint(ctx, "badhead", 0); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("tampered head: %v", err)
	}
	// A save reads no revision (the head holds the segments), as on the
	// embedded store: it succeeds, and the tampered revision stays refused.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "bad", ExpectedRevision: 1}); err != nil {
		t.Fatalf("save over a tampered revision: %v", err)
	}
	if _, err := s.Checkpoint(ctx, "bad", 1); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("tampered revision after a save: %v", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "badhead", ExpectedRevision: 1}); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("save over a tampered head: %v", err)
	}
	if cp, err := s.Checkpoint(ctx, "good", 0); err != nil || cp.Task != "t" {
		t.Fatalf("untouched session: %+v %v", cp, err)
	}
	rep, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damaged) != 2 || rep.Damaged[0].SessionID != "bad" || rep.Damaged[1].SessionID != "badhead" ||
		!strings.Contains(rep.Damaged[0].Problem, "checksum mismatch") || rep.CheckedSessions != 3 {
		t.Fatalf("verify: %+v", rep)
	}
	sums, err := s.ListSessions(ctx, "", 10, core.SessionFilter{})
	if err != nil || len(sums) != 3 || sums[1].SessionID != "badhead" || sums[1].Revision != 0 {
		t.Fatalf("list with a damaged head: %+v %v", sums, err)
	}
	if tomb, err := s.DeleteSession(ctx, "badhead", 0); err != nil || tomb != 1 {
		t.Fatalf("delete a damaged head: %d %v", tomb, err)
	}
	if _, err := s.DeleteSession(ctx, "bad", 1); err != nil {
		t.Fatalf("delete a damaged session: %v", err)
	}
	if rep, err := s.Verify(ctx); err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("verify after the deletes: %+v %v", rep, err)
	}
}

// TestLargeSessions: the largest save the daemon admits (1,000 messages,
// 256 pending tool uses) reads back whole through paging, and listing pages
// past more sessions than one query reads.
func TestLargeSessions(t *testing.T) {
	srv := pgtest.Shared(t)
	s := open(t, srv.URL("postgres"), newSchema())
	var msgs []core.Message
	for i := range core.MaxAppendMessages {
		msgs = append(msgs, core.Message{Role: "user", ContentJSON: fmt.Sprintf(`"%0500d"`, i)})
	}
	var calls []core.ToolUse
	for i := range core.MaxPendingToolUses {
		calls = append(calls, core.ToolUse{ID: fmt.Sprintf("t%d", i), Name: "n", InputJSON: `{}`})
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "big", AppendMessages: msgs, PendingToolUses: calls}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "big", ExpectedRevision: 1, AppendMessages: msgs}); err != nil {
		t.Fatal(err)
	}
	var got []core.Message
	for {
		page, err := s.Messages(ctx, "big", 0, uint64(len(got)), 64<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
	}
	if len(got) != 2*len(msgs) || got[1500] != msgs[500] {
		t.Fatalf("read back %d messages, want %d", len(got), 2*len(msgs))
	}
	if _, pending, err := s.PendingToolUses(ctx, "big"); err != nil || len(pending) != 0 {
		t.Fatalf("pending after the second save: %d %v", len(pending), err)
	}
	if cp, err := s.Checkpoint(ctx, "big", 1); err != nil || len(cp.PendingToolUses) != len(calls) {
		t.Fatalf("revision 1: %d pending, %v", len(cp.PendingToolUses), err)
	}
	for i := range 600 {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprintf("s%04d", i), Labels: map[string]string{"odd": fmt.Sprint(i % 2)}}); err != nil {
			t.Fatal(err)
		}
	}
	n, after := 0, ""
	for {
		page, err := s.ListSessions(ctx, after, 7, core.SessionFilter{Labels: map[string]string{"odd": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		n += len(page)
		after = page[len(page)-1].SessionID
	}
	if n != 300 {
		t.Fatalf("listed %d odd sessions, want 300", n)
	}
}

// TestTwoStoresCreateRace: two stores race to create one session with one
// request id, round after round. The loser's insert of the session's row
// waits for the winner's commit and fails with a unique violation; its
// request runs again, reads the row afresh and replays the request id, so
// both get revision 1, and without a request id the loser gets
// SESSION_EXISTS.
func TestTwoStoresCreateRace(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	stores := []*pgstore.Store{open(t, srv.URL("postgres"), schema), open(t, srv.TCPURL("postgres"), schema)}
	for round := range *rounds {
		for _, requestID := range []string{"r", ""} {
			sid := fmt.Sprintf("c%d-%q", round, requestID)
			req := &core.SaveRequest{SessionID: sid, RequestID: requestID, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}
			var wg sync.WaitGroup
			res := make([]core.SaveResult, 2)
			errs := make([]error, 2)
			start := make(chan struct{})
			for i, s := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res[i], errs[i] = s.SaveCheckpoint(ctx, req)
				}()
			}
			close(start)
			wg.Wait()
			switch {
			case requestID != "":
				if errs[0] != nil || errs[1] != nil || res[0] != res[1] || res[0].Revision != 1 {
					t.Fatalf("round %d: %+v %v, %+v %v; want revision 1 twice", round, res[0], errs[0], res[1], errs[1])
				}
			case (errs[0] == nil) == (errs[1] == nil):
				t.Fatalf("round %d without a request id: %v, %v; want one winner", round, errs[0], errs[1])
			case !errors.Is(errors.Join(errs[0], errs[1]), core.ErrSessionExists):
				t.Fatalf("round %d without a request id: %v, %v; want SESSION_EXISTS for the loser", round, errs[0], errs[1])
			}
			if cp, err := stores[1].Checkpoint(ctx, sid, 0); err != nil || cp.Revision != 1 || cp.MessageCount != 1 {
				t.Fatalf("round %d: %s after the race: %+v %v", round, sid, cp, err)
			}
		}
	}
}
