package pgstore_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	"github.com/savepoint-dev/savepoint/daemon/rpc"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// serveAPI serves SavepointService over store on a loopback port, as a
// savepointd would, and returns a client of it.
func serveAPI(t *testing.T, api *rpc.Server) savepointv1.SavepointServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	savepointv1.RegisterSavepointServiceServer(srv, api)
	go srv.Serve(lis)
	t.Cleanup(func() { api.Shutdown(); srv.Stop() })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return savepointv1.NewSavepointServiceClient(conn)
}

// TestWatchAcrossDaemons runs two daemons' services on one database: a
// watch on the first sees the changes made through the second by polling,
// within the documented second (plus slack), a BeginEffect (no new
// revision) included, and a change made through the first once, not again
// when its poll finds it too; directly and through PgBouncer's transaction
// pooling, which LISTEN/NOTIFY would not pass.
func TestWatchAcrossDaemons(t *testing.T) {
	srv := pgtest.Shared(t)
	t.Run("Direct", func(t *testing.T) { testWatchAcrossDaemons(t, srv.URL("postgres")) })
	t.Run("PgBouncer", func(t *testing.T) {
		b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{PoolSize: 8})
		testWatchAcrossDaemons(t, b.URL("postgres", pooledModes[0].extra))
	})
}

func testWatchAcrossDaemons(t *testing.T, url string) {
	schema := newSchema()
	a := serveAPI(t, rpc.NewServer(open(t, url, schema), rpc.Options{}))
	b := serveAPI(t, rpc.NewServer(open(t, url, schema), rpc.Options{}))

	stream, err := a.WatchSessions(ctx, &savepointv1.WatchSessionsRequest{
		LabelFilter: map[string]string{"team": "w"}, HeartbeatInterval: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
		t.Fatalf("first response %v, %v", r, err)
	}
	events := make(chan *savepointv1.WatchSessionsResponse, 100)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(events)
				return
			}
			events <- r
		}
	}()
	next := func(what string, within time.Duration) (*savepointv1.WatchSessionsResponse, time.Duration) {
		t.Helper()
		start := time.Now()
		select {
		case r, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return r, time.Since(start)
		case <-time.After(within):
			t.Fatalf("%s: no event within %v", what, within)
		}
		return nil, 0
	}
	const within = 2500 * time.Millisecond // the 1 s poll, its query, slack for a loaded machine

	if _, err := b.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", Labels: map[string]string{"team": "w"},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "t", Name: "send", BeginTracked: true}}}); err != nil {
		t.Fatal(err)
	}
	r, delay := next("a save through b", within)
	if r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED || r.GetSessionId() != "s" || r.GetSession().GetRevision() != 1 {
		t.Fatalf("a save through b: %v", r)
	}
	t.Logf("a save through the other daemon reached the watch in %v", delay)

	if _, err := b.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t"}); err != nil {
		t.Fatal(err)
	}
	r, _ = next("BeginEffect through b", within)
	if r.GetSession().GetRevision() != 1 || r.GetSession().GetInDoubtToolUseCount() != 1 {
		t.Fatalf("BeginEffect through b: %v", r)
	}

	if _, err := a.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Labels: map[string]string{"team": "w"}}); err != nil {
		t.Fatal(err)
	}
	r, delay = next("a save through a", within)
	if r.GetSession().GetRevision() != 2 || delay > time.Second {
		t.Fatalf("a save through a: %v after %v", r, delay)
	}
	select {
	case r := <-events:
		t.Fatalf("the save through a arrived again: %v", r)
	case <-time.After(2 * time.Second): // two polls
	}
}

// TestChangeReaderLongTransaction checks the poll's bound: a change made by
// a transaction that stays open across several polls, then commits, is
// read once it commits, though polls after it began moved on; a change
// seen is not returned again.
func TestChangeReaderLongTransaction(t *testing.T) {
	srv := pgtest.Shared(t)
	url, schema := srv.URL("postgres"), newSchema()
	s := open(t, url, schema)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "long"}); err != nil {
		t.Fatal(err)
	}
	r := s.ChangeReader()
	if ids, err := r.Changed(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("first read: %v %v", ids, err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// As runOne stamps a write, in a transaction left open.
	if _, err := tx.Exec(ctx, `UPDATE "`+schema+`".sessions SET changed_xid = pg_current_xact_id() WHERE session_id = 'long'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "quick"}); err != nil {
		t.Fatal(err)
	}
	if ids, err := r.Changed(ctx); err != nil || !slices.Equal(ids, []string{"quick"}) {
		t.Fatalf("while the long transaction runs: %v %v, want quick", ids, err)
	}
	for range 2 {
		if ids, err := r.Changed(ctx); err != nil || len(ids) != 0 {
			t.Fatalf("nothing new: %v %v", ids, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := r.Changed(ctx); err != nil || !slices.Equal(ids, []string{"long"}) {
		t.Fatalf("after the long transaction committed: %v %v, want long", ids, err)
	}
}
