package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestWatchSessions watches through a running savepointd: the first
// response is a heartbeat; a save of a selected session arrives with its
// summary within 2 s, one the label filter does not select as a removal;
// heartbeats follow at their interval; and stopping the daemon ends the
// stream with UNAVAILABLE at once rather than after the shutdown timeout.
func TestWatchSessions(t *testing.T) {
	store, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := daemon.Config{Listen: "unix:" + daemontest.SocketPath(t), ShutdownTimeout: 30 * time.Second}
	runCtx, stopDaemon := context.WithCancel(context.Background())
	exited := make(chan error, 1)
	go func() { exited <- daemon.Run(runCtx, cfg, store, slog.New(slog.DiscardHandler)) }()
	defer func() { stopDaemon(); <-exited }()
	if err := daemontest.WaitServing(cfg.Listen[len("unix:"):], 20*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := savepointv1.NewSavepointServiceClient(conn)

	stream, err := c.WatchSessions(ctx, &savepointv1.WatchSessionsRequest{
		LabelFilter: map[string]string{"team": "a"}, HeartbeatInterval: durationpb.New(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *savepointv1.WatchSessionsResponse {
		t.Helper()
		for {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("recv: %v", err)
			}
			if r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
				return r
			}
		}
	}
	if r, err := stream.Recv(); err != nil || r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT || r.GetSendTime() == nil {
		t.Fatalf("first response %v, %v; want a heartbeat", r, err)
	}
	saved := time.Now()
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "x", Task: "t", Labels: map[string]string{"team": "a"}}); err != nil {
		t.Fatal(err)
	}
	r := recv()
	delay := time.Since(saved)
	if delay > 2*time.Second {
		t.Errorf("the change took %v to arrive", delay)
	}
	t.Logf("from the save's call to its event: %v", delay)
	if r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED || r.GetSessionId() != "x" ||
		r.GetSession().GetRevision() != 1 || r.GetSession().GetTask() != "t" || r.GetSession().GetCreateTime() == nil ||
		r.GetSession().GetStatus() != savepointv1.SessionStatus_SESSION_STATUS_ACTIVE {
		t.Fatalf("after the save of x: %v", r)
	}
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "y", Labels: map[string]string{"team": "b"}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(); r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_REMOVED || r.GetSessionId() != "y" || r.GetSession() != nil {
		t.Fatalf("after the save of y, outside the filter: %v", r)
	}
	for range 2 {
		if r, err := stream.Recv(); err != nil || r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
			t.Fatalf("idle: %v, %v; want a heartbeat", r, err)
		}
	}

	stopped := time.Now()
	stopDaemon()
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream ended with %v, want UNAVAILABLE", err)
		}
		break
	}
	if d := time.Since(stopped); d > 5*time.Second {
		t.Fatalf("the stream ended %v after the stop began", d)
	}
	if err := <-exited; err != nil {
		t.Fatalf("daemon.Run: %v", err)
	}
	exited <- nil
}

// TestWatchSessionsResync watches through a running savepointd without
// reading while more than core.WatchQueue distinct sessions change: the
// watch's stream blocks once HTTP/2 flow control is out of window (the
// client's windows are fixed at 64 KiB, so gRPC's BDP estimation cannot
// grow them, and the first sessions carry 48 KiB tasks to fill them at
// once), its queue overflows, and when the client reads again it gets the
// changes sent before the overflow, then RESYNC, then the changes made
// after it. A heartbeat (the stream idle) before RESYNC fails the test.
func TestWatchSessionsResync(t *testing.T) {
	store, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := daemon.Config{Listen: "unix:" + daemontest.SocketPath(t)}
	runCtx, stopDaemon := context.WithCancel(context.Background())
	exited := make(chan error, 1)
	go func() { exited <- daemon.Run(runCtx, cfg, store, slog.New(slog.DiscardHandler)) }()
	defer func() { stopDaemon(); <-exited }()
	if err := daemontest.WaitServing(cfg.Listen[len("unix:"):], 20*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := savepointv1.NewSavepointServiceClient(conn)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := c.WatchSessions(wctx, &savepointv1.WatchSessionsRequest{HeartbeatInterval: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
		t.Fatalf("first response %v, %v; want a heartbeat", r, err)
	}

	// 16 sessions of 48 KiB tasks (768 KiB of events, well past the
	// windows), then WatchQueue+64 more: more distinct sessions than a
	// watcher holds, whatever the stream took before it blocked.
	const big, small = 16, core.WatchQueue + 64
	started := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, big+small)
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				task := "t"
				if i < big {
					task = strings.Repeat("x", 48<<10)
				}
				_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprintf("s%04d", i), Task: task})
				errs <- err
			}
		})
	}
	for i := range big + small {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d saves unread in %v", big+small, time.Since(started))

	before := 0
	for resynced := false; !resynced; {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv after %d events: %v", before, err)
		}
		switch r.GetType() {
		case savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED:
			before++
		case savepointv1.WatchEventType_WATCH_EVENT_TYPE_RESYNC:
			resynced = true
		default:
			t.Fatalf("after %d changes of %d sessions: %v; want RESYNC before the stream goes idle", before, big+small, r)
		}
	}
	if before >= big+small {
		t.Fatalf("%d changes sent before RESYNC, of %d sessions: none were dropped", before, big+small)
	}
	t.Logf("%d changes sent before RESYNC", before)

	// Every change after RESYNC is sent.
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "after", Task: "later"}); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv after RESYNC: %v", err)
		}
		if r.GetType() == savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
			continue
		}
		if r.GetType() != savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED || r.GetSessionId() != "after" || r.GetSession().GetTask() != "later" {
			t.Fatalf("after RESYNC and a save of \"after\": %v", r)
		}
		break
	}
	t.Logf("the whole test: %v", time.Since(started))
}
