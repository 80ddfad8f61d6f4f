package integration_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestListSessionsByUpdate pages ListSessions with order_by "update_time
// desc" through a running savepointd: every session once, the last updated
// first, over pages of two; a token of one order is refused by the other.
func TestListSessionsByUpdate(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	c := d.Client
	for _, id := range []string{"e", "d", "c", "b", "a"} {
		if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "d", ExpectedRevision: 1}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var byUpdateToken string
	for token := ""; ; {
		resp, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 2, PageToken: token, OrderBy: "update_time desc"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.GetSessions() {
			ids = append(ids, s.GetSessionId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
		byUpdateToken = token
	}
	if want := []string{"d", "a", "b", "c", "e"}; !slices.Equal(ids, want) {
		t.Fatalf("by update: %v, want %v", ids, want)
	}
	_, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageToken: byUpdateToken})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a by-update token in session_id order: %v", err)
	}
	resp, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{OrderBy: "session_id"})
	if err != nil || len(resp.GetSessions()) != 5 || resp.GetSessions()[0].GetSessionId() != "a" {
		t.Fatalf("order_by session_id: %v %v", resp, err)
	}
}
