package client_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// startApproval starts session id with one pending call of a tool that
// requires approval, and returns it.
func startApproval(t *testing.T, c *client.Client, id string, call client.ToolUse) *client.Session {
	t.Helper()
	ctx := t.Context()
	s, err := c.Start(ctx, id, "pay", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(ctx, assistantFor(call), []client.ToolUse{call}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApprovalOnce: a tool that requires approval does not run until a
// person approves its exact call; an approval for other input does not
// unlock it; the approval is spent by the begin, so a process killed after
// BeginEffect, resumed and replayed from an older revision never runs the
// side effect a second time; a new call with the same input needs a new
// approval.
func TestApprovalOnce(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	c := dial(t, addr, client.WithApprovalRequired("send_payment"))
	person := dial(t, addr)
	ctx := t.Context()
	call := client.ToolUse{ToolUseID: "toolu_pay", Name: "send_payment", InputJSON: `{"cents": 500}`}
	s := startApproval(t, c, "appr-1", call)
	var paid int
	pay := func(context.Context, string) (string, error) { paid++; return "paid 5 EUR", nil }

	r := s.RunTool(ctx, call, pay)
	var wait *client.AwaitingApprovalError
	if !errors.Is(r.Err, client.ErrAwaitingApproval) || !errors.As(r.Err, &wait) || wait.Call.ToolUseID != "toolu_pay" || paid != 0 {
		t.Fatalf("run without approval: %+v (paid %d)", r, paid)
	}
	sum, err := person.Raw().ListSessions(ctx, &savepointv1.ListSessionsRequest{})
	if err != nil || sum.GetSessions()[0].GetAwaitingApprovalCount() != 1 {
		t.Fatalf("ls while waiting: %v %v", sum, err)
	}
	// An approval for other input is refused, and unlocks nothing.
	other := bytes.Repeat([]byte{9}, 32)
	if _, err := person.ApproveEffect(ctx, "appr-1", "toolu_pay", client.Approval{InputDigest: other}); !errors.Is(err, client.ErrApprovalInputMismatch) {
		t.Fatalf("approval for other input: %v", err)
	}
	if r := s.RunTool(ctx, call, pay); !errors.Is(r.Err, client.ErrAwaitingApproval) || paid != 0 {
		t.Fatalf("run after the refused approval: %+v", r)
	}
	// The person approves the input the call waits with.
	if _, err := person.ApproveEffect(ctx, "appr-1", "toolu_pay", client.Approval{InputDigest: wait.Approval.GetInputDigest(), DecidedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	// The process is killed after BeginEffect: the tool ran, unrecorded.
	b, err := c.Raw().BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "appr-1", ToolUseId: "toolu_pay", Epoch: s.Epoch(), RequiresApproval: true})
	if err != nil || b.GetDecision() != savepointv1.Decision_DECISION_RUN || !b.GetApproval().GetSpent() {
		t.Fatalf("begin with the approval: %v %v", b, err)
	}
	paid++
	// Resumed: in doubt, not run; a replay from the older revision (a
	// rewind to it) is the same begin, and runs nothing either.
	for _, replay := range []bool{false, true} {
		c2 := dial(t, addr, client.WithApprovalRequired("send_payment"))
		s2, err := c2.Resume(ctx, "appr-1")
		if err != nil {
			t.Fatal(err)
		}
		if replay {
			if _, err := c2.Raw().RewindSession(ctx, &savepointv1.RewindSessionRequest{SessionId: "appr-1", Epoch: s2.Epoch(), Revision: 2}); err != nil {
				t.Fatal(err)
			}
			if s2, err = c2.Resume(ctx, "appr-1"); err != nil {
				t.Fatal(err)
			}
		}
		results, err := s2.Reconcile(ctx, func(ctx context.Context, _ client.ToolUse, k string) (string, error) { return pay(ctx, k) })
		if err != nil || len(results) != 1 || results[0].Decision != client.DecisionInDoubt {
			t.Fatalf("reconcile (replay %v): %+v %v", replay, results, err)
		}
	}
	if paid != 1 {
		t.Fatalf("the payment ran %d times", paid)
	}
	// A new call with the same input waits for its own approval.
	s3 := startApproval(t, c, "appr-2", client.ToolUse{ToolUseID: "toolu_pay2", Name: "send_payment", InputJSON: `{"cents":500}`})
	if r := s3.RunTool(ctx, client.ToolUse{ToolUseID: "toolu_pay2", Name: "send_payment"}, pay); !errors.Is(r.Err, client.ErrAwaitingApproval) || paid != 1 {
		t.Fatalf("a new call with the same input: %+v", r)
	}
}

// TestApprovalDenied: a denial reaches the model as the tool's result, with
// the approver's note, and is reused after a resume; the tool never runs.
func TestApprovalDenied(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	c := dial(t, addr, client.WithApprovalRequired("send_payment"))
	ctx := t.Context()
	call := client.ToolUse{ToolUseID: "toolu_pay", Name: "send_payment", InputJSON: `{"cents": 90000}`}
	s := startApproval(t, c, "deny-1", call)
	runs := 0
	run := func(context.Context, client.ToolUse, string) (string, error) { runs++; return "paid", nil }
	if r := s.RunTool(ctx, call, func(ctx context.Context, k string) (string, error) { return run(ctx, call, k) }); !errors.Is(r.Err, client.ErrAwaitingApproval) {
		t.Fatalf("run: %+v", r)
	}
	if _, err := c.ApproveEffect(ctx, "deny-1", "toolu_pay", client.Approval{Deny: true, Note: "over the limit; ask finance", DecidedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApproveEffect(ctx, "deny-1", "toolu_pay", client.Approval{}); !errors.Is(err, client.ErrApprovalConflict) {
		t.Fatalf("approve after the denial: %v", err)
	}
	results, err := s.Reconcile(ctx, run)
	if err != nil || len(results) != 1 || results[0].Decision != client.DecisionDenied || !results[0].IsError ||
		!strings.Contains(results[0].Content, "over the limit; ask finance") || runs != 0 {
		t.Fatalf("reconcile after the denial: %+v %v (runs %d)", results, err, runs)
	}
	if err := s.PointB(ctx, results); err != nil {
		t.Fatal(err)
	}
	cp, err := c.Raw().GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "deny-1"})
	if err != nil {
		t.Fatal(err)
	}
	last := cp.GetCheckpoint().GetMessages()[len(cp.GetCheckpoint().GetMessages())-1]
	if !strings.Contains(last.GetContentJson(), "over the limit; ask finance") || !strings.Contains(last.GetContentJson(), `"is_error":true`) {
		t.Fatalf("the model's tool result: %s", last.GetContentJson())
	}
}
