package integration_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestRetainIdleDeletesIdleThreads runs savepointd with --retain-idle 1s: a
// graph thread left alone is deleted within a few sweeps, while one just
// written is kept.
func TestRetainIdleDeletesIdleThreads(t *testing.T) {
	sock := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + sock, RetainIdle: time.Second}, nil)
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := savepointv1.NewGraphCheckpointServiceClient(conn)
	ctx := context.Background()
	put := func(thread string) {
		t.Helper()
		_, err := c.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{
			ThreadId: thread, CheckpointId: "1", Checkpoint: &savepointv1.TypedValue{Type: "json", Data: []byte("{}"), TotalSize: 2},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	exists := func(thread string) bool {
		t.Helper()
		tup, err := graphtest.Get(ctx, c, &savepointv1.GetCheckpointRequest{ThreadId: thread}, 3<<20)
		if err != nil {
			t.Fatal(err)
		}
		return tup != nil
	}
	put("idle")
	if !exists("idle") {
		t.Fatal("the thread just put is not there")
	}
	deadline := time.Now().Add(15 * time.Second)
	for exists("idle") {
		if time.Now().After(deadline) {
			t.Fatal("an idle thread was still there 15s after it was written, with --retain-idle 1s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	put("fresh")
	if !exists("fresh") {
		t.Error("a thread written a moment ago was deleted")
	}
}
