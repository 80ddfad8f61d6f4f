package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestRetentionFlags runs savepointd with --retain-completed and
// --retain-idle on a short --gc-interval: a completed session and an idle
// one go, a session saved meanwhile stays.
func TestRetentionFlags(t *testing.T) {
	d := daemontest.Start(t, "--retain-completed", "1s", "--retain-idle", "3s", "--gc-interval", "200ms")
	ctx := context.Background()
	c := d.Client
	for _, id := range []string{"done", "idle", "busy"} {
		if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{SessionId: "done", Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED}); err != nil {
		t.Fatal(err)
	}
	gone := func(id string) bool {
		_, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: id})
		return status.Code(err) == codes.NotFound
	}
	rev := uint64(1)
	deadline := time.Now().Add(15 * time.Second)
	for !(gone("done") && gone("idle")) {
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: done gone %v, idle gone %v\n%s", gone("done"), gone("idle"), d.Stderr())
		}
		r, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "busy", ExpectedRevision: rev})
		if err != nil {
			t.Fatal(err)
		}
		rev = r.GetRevision()
		time.Sleep(100 * time.Millisecond)
	}
	if gone("busy") {
		t.Error("the session saved all along was deleted")
	}
}
