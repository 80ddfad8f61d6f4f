package pgstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/core/storetest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// The query exec modes that need no prepared statement kept across
// transactions, as PgBouncer's transaction pooling requires.
var pooledModes = []struct{ name, extra string }{
	{"SimpleProtocol", "default_query_exec_mode=simple_protocol"},
	{"Exec", "default_query_exec_mode=exec"},
}

// TestPgBouncerConformance runs the store conformance suite against stores
// opened through a real PgBouncer in transaction pooling, over its Unix
// socket, in both exec modes fit for it.
func TestPgBouncerConformance(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{PoolSize: 8})
	t.Logf("%s, pool_mode=%s", b.Version(), b.Opts.PoolMode)
	for _, mode := range pooledModes {
		t.Run(mode.name, func(t *testing.T) {
			url := b.URL("postgres", mode.extra)
			storetest.Run(t, func(t *testing.T) core.Store {
				s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: newSchema()})
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// TestPgBouncerDefaultMode: pgx's default query exec mode (the statement
// cache) is refused at Open with ErrConfig naming the exec mode to use,
// whether PgBouncer refuses the statement_timeout start-up parameter (its
// default) or is told to ignore it and then hands prepared statements to
// the wrong clients; behind session pooling it works.
func TestPgBouncerDefaultMode(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, tc := range []struct {
		name   string
		opts   pgtest.BouncerOptions
		refuse string // "": Open succeeds
	}{
		{"TransactionPooling", pgtest.BouncerOptions{}, "refuses connections that set statement_timeout"},
		{"TransactionPoolingIgnoringStatementTimeout",
			pgtest.BouncerOptions{IgnoreStartupParameters: []string{"statement_timeout"}}, "does not keep a connection's prepared statements"},
		{"TransactionPoolingOneServer",
			pgtest.BouncerOptions{PoolSize: 1, IgnoreStartupParameters: []string{"statement_timeout"}}, "does not keep a connection's prepared statements"},
		{"SessionPooling", pgtest.BouncerOptions{PoolMode: "session", IgnoreStartupParameters: []string{"statement_timeout"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := pgtest.NewBouncer(t, srv, tc.opts)
			for _, url := range []string{b.URL("postgres"), b.TCPURL("postgres")} {
				start := time.Now()
				s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: newSchema(), StatementTimeout: 5 * time.Second})
				if tc.refuse == "" {
					if err != nil {
						t.Fatalf("open through %s: %v", url, err)
					}
					defer s.Close()
					res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := s.Resume(ctx, "s", false); err != nil {
						t.Fatal(err)
					}
					if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: res.Revision, Epoch: 2}); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err == nil {
					s.Close()
					t.Fatalf("open through %s in the default exec mode succeeded", url)
				}
				if !errors.Is(err, pgstore.ErrConfig) || errors.Is(err, core.ErrUnavailable) ||
					!strings.Contains(err.Error(), tc.refuse) || !strings.Contains(err.Error(), "default_query_exec_mode=simple_protocol") {
					t.Fatalf("open through %s: %v; want ErrConfig saying %q and naming the exec mode", url, err, tc.refuse)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("the refusal took %v", d)
				}
				t.Logf("%s: %v", tc.name, err)
			}
		})
	}
	// The same URLs in an exec mode without prepared statements work.
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{})
	for _, mode := range pooledModes {
		s := open(t, b.URL("postgres", mode.extra), newSchema())
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
	}
}

// saveAndResume, for each session of ids at once, creates it (rev 0) or
// resumes it and saves it at rev, then resumes it and saves it again, each
// save with the epoch its resume returned, failing t on any error; it
// returns the sessions' revision after.
func saveAndResume(t *testing.T, s *pgstore.Store, ids []string, rev uint64) uint64 {
	t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var epoch uint64
			if rev > 0 {
				cp, err := s.Resume(ctx, id, false)
				if err != nil {
					t.Errorf("resume %s: %v", id, err)
					return
				}
				epoch = cp.Epoch
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, ExpectedRevision: rev, Epoch: epoch,
				AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hi"`}}}); err != nil {
				t.Errorf("save %s at revision %d: %v", id, rev, err)
				return
			}
			cp, err := s.Resume(ctx, id, false)
			if err != nil {
				t.Errorf("resume %s: %v", id, err)
				return
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, ExpectedRevision: rev + 1, Epoch: cp.Epoch}); err != nil {
				t.Errorf("save %s after resume: %v", id, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return rev + 2
}

// TestPgBouncerIdle: PgBouncer ends the store's idle client connections
// (client_idle_timeout) and its own idle server connections
// (server_idle_timeout, server_lifetime) while the store sits idle; the
// next saves and resumes succeed with no error reaching the caller.
func TestPgBouncerIdle(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{
		ServerIdleTimeout: 500 * time.Millisecond, ServerLifetime: time.Second, ClientIdleTimeout: time.Second})
	ids := []string{"a", "b", "c", "d"}
	for _, mode := range pooledModes {
		t.Run(mode.name, func(t *testing.T) {
			db := srv.NewDatabase(t)
			s := open(t, b.URL(db, mode.extra), newSchema())
			rev := saveAndResume(t, s, ids, 0)
			for round := range 2 {
				// PgBouncer logs each connection it closes, with why.
				closed := func() (clients, servers int) {
					for _, l := range strings.Split(b.Log(), "\n") {
						switch {
						case !strings.Contains(l, " "+db+"/postgres@"):
						case strings.Contains(l, "closing because: client_idle_timeout"):
							clients++
						case strings.Contains(l, "closing because: server idle timeout"), strings.Contains(l, "closing because: server lifetime over"):
							servers++
						}
					}
					return clients, servers
				}
				clients0, servers0 := closed()
				deadline := time.Now().Add(15 * time.Second)
				for {
					clients, servers := closed()
					if clients > clients0 && servers > servers0 && b.Connections(t, "CLIENTS", db)+b.Connections(t, "SERVERS", db) == 0 {
						t.Logf("round %d: PgBouncer ended %d idle client and %d idle server connections", round, clients-clients0, servers-servers0)
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("round %d: PgBouncer did not end the idle connections: %d clients, %d servers open\n%s", round,
							b.Connections(t, "CLIENTS", db), b.Connections(t, "SERVERS", db), b.Log())
					}
					time.Sleep(200 * time.Millisecond)
				}
				rev = saveAndResume(t, s, ids, rev)
				if cp, err := s.Checkpoint(ctx, "a", 0); err != nil || cp.Revision != rev {
					t.Fatalf("round %d: %+v %v", round, cp, err)
				}
			}
		})
	}
}

// TestPgBouncerRestart: with PgBouncer killed every call fails with
// ErrUnavailable within the statement timeout, saying why, and the group
// commit still answers; once PgBouncer is started again on the same
// address the same store serves again. Killed and started again between
// two calls, the next call succeeds.
func TestPgBouncerRestart(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{})
	for _, mode := range []struct{ name, url string }{
		{"UnixSimpleProtocol", b.URL("postgres", "default_query_exec_mode=simple_protocol")},
		{"TCPExec", b.TCPURL("postgres", "default_query_exec_mode=exec")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := open(t, mode.url, newSchema(), func(o *pgstore.Options) { o.StatementTimeout = 2 * time.Second })
			rev := saveAndResume(t, s, []string{"a", "b"}, 0)

			b.Kill()
			start := time.Now()
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "a", ExpectedRevision: rev})
			if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "PostgreSQL") {
				t.Errorf("save with PgBouncer down: %v", err)
			}
			if _, err := s.Resume(ctx, "a", false); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("resume with PgBouncer down: %v", err)
			}
			if _, err := s.Checkpoint(ctx, "a", 0); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("read with PgBouncer down: %v", err)
			}
			if _, err := s.ListSessions(ctx, "", 10, core.SessionFilter{}); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("list with PgBouncer down: %v", err)
			}
			if err := s.Reachable(ctx); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("reachable with PgBouncer down: %v", err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Errorf("ping with PgBouncer down: %v", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the failed calls took %v", d)
			}
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			// Nothing of the failed save was committed: the session is
			// where it was, and the pool reconnects.
			if cp, err := s.Checkpoint(ctx, "a", 0); err != nil || cp.Revision != rev {
				t.Fatalf("read after PgBouncer is back: %+v %v", cp, err)
			}
			rev = saveAndResume(t, s, []string{"a", "b"}, rev)

			// Killed and back between two calls.
			b.Kill()
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			rev = saveAndResume(t, s, []string{"a", "b"}, rev)
			b.Stop() // SIGTERM: PgBouncer's immediate shutdown
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			if cp, err := s.Checkpoint(ctx, "b", 0); err != nil || cp.Revision != rev {
				t.Fatalf("read after PgBouncer's restart: %+v %v", cp, err)
			}
			saveAndResume(t, s, []string{"a", "b"}, rev)
		})
	}
}
