package daemon_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
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
