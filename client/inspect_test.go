package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The inspection helpers return every page: ListSessions past the response
// budget, GetSession's whole history, ReconcileView's every resolution.
func TestInspectionHelpersPage(t *testing.T) {
	addr := startDaemon(t, daemon.Config{MaxStateBytes: 1 << 10, ResponseBudgetBytes: 130 << 10})
	c := dial(t, addr)
	ctx := t.Context()
	raw := c.Raw()
	const sessions = 40 // 4 KiB tasks: over the 130 KiB budget together
	for i := range sessions {
		labels := map[string]string{"parity": fmt.Sprint(i % 2)}
		if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprintf("s%02d", i), Task: strings.Repeat("t", 4<<10), Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	if first, err := raw.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 1000}); err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("every session fits one page (%v): nothing is paged", err)
	}
	all, err := c.ListSessions(ctx, nil)
	if err != nil || len(all) != sessions {
		t.Fatalf("ListSessions: %d sessions, %v; want %d", len(all), err, sessions)
	}
	for i, s := range all {
		if s.GetSessionId() != fmt.Sprintf("s%02d", i) {
			t.Fatalf("session %d is %s: not in id order", i, s.GetSessionId())
		}
	}
	odd, err := c.ListSessions(ctx, map[string]string{"parity": "1"})
	if err != nil || len(odd) != sessions/2 || odd[0].GetSessionId() != "s01" {
		t.Fatalf("filtered: %d sessions, %v", len(odd), err)
	}

	var msgs []*savepointv1.Message
	for i := range 300 {
		msgs = append(msgs, &savepointv1.Message{Role: "user", ContentJson: fmt.Sprintf(`"%03d %s"`, i, strings.Repeat("m", 1000))})
	}
	pending := []*savepointv1.ToolUse{{ToolUseId: "a", Name: "w"}, {ToolUseId: "b", Name: "w"}}
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "long", AppendMessages: msgs[:100]}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "long", ExpectedRevision: 1, AppendMessages: msgs[100:], PendingToolUses: pending}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "long", ToolUseId: id, Output: strings.Repeat("o", 100<<10)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ revision, want uint64 }{{0, 300}, {2, 300}, {1, 100}} {
		cp, err := c.GetSession(ctx, "long", tc.revision)
		if err != nil || uint64(len(cp.GetMessages())) != tc.want {
			t.Fatalf("GetSession revision %d: %d messages, %v; want %d", tc.revision, len(cp.GetMessages()), err, tc.want)
		}
		for i, m := range cp.GetMessages() {
			if !strings.HasPrefix(m.GetContentJson(), fmt.Sprintf(`"%03d `, i)) {
				t.Fatalf("revision %d message %d: %.8s", tc.revision, i, m.GetContentJson())
			}
		}
	}
	if _, err := c.GetSession(ctx, "long", 9); !errors.Is(err, client.ErrRevisionNotFound) {
		t.Errorf("GetSession of revision 9: %v, want ErrRevisionNotFound", err)
	}
	if _, err := c.GetSession(ctx, "nope", 0); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("GetSession of a missing session: %v, want ErrSessionNotFound", err)
	}
	if p, err := raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "long"}); err != nil || p.GetNextPageToken() == "" {
		t.Fatalf("both resolutions fit one page (%v): nothing is paged", err)
	}
	rec, err := c.ReconcileView(ctx, "long")
	if err != nil || rec.GetRevision() != 2 || len(rec.GetResolutions()) != 2 || rec.GetNextPageToken() != "" {
		t.Fatalf("ReconcileView: %v %v", rec, err)
	}
	for _, r := range rec.GetResolutions() {
		if r.GetDecision() != savepointv1.Decision_DECISION_REUSE || len(r.GetEffect().GetOutput()) != 100<<10 {
			t.Errorf("resolution of %s: %v", r.GetToolUse().GetToolUseId(), r.GetDecision())
		}
	}
}
