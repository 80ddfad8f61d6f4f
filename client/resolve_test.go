package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// killedAfterBegin leaves session id as a process killed after BeginEffect
// of a side-effecting call leaves it (the tool ran once, unrecorded), and
// returns the key it was begun with.
func killedAfterBegin(t *testing.T, c *client.Client, id string, call client.ToolUse) string {
	t.Helper()
	ctx := t.Context()
	s, err := c.Start(ctx, id, "pay", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(ctx, assistantFor(call), []client.ToolUse{call}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Raw().BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: id, ToolUseId: call.ToolUseID, Epoch: s.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	return b.GetIdempotencyKey()
}

func TestDaemonResolveInDoubt(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	call := client.ToolUse{ToolUseID: "toolu_pay", Name: "send_payment", EffectClass: client.SideEffect}
	for i, tt := range []struct {
		name     string
		finding  client.Finding
		want     client.Decision
		wantRuns int
		content  string
	}{
		{"done", client.Finding{Done: true, Output: "paid 5 EUR, ref 42", ResolvedBy: "alice", Note: "bank log"}, client.DecisionReuse, 0, "paid 5 EUR, ref 42"},
		{"not done", client.Finding{ResolvedBy: "alice"}, client.DecisionRun, 1, "paid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			id := fmt.Sprintf("resolve-%d", i)
			key := killedAfterBegin(t, c, id, call)
			resp, err := c.ResolveEffect(ctx, id, call.ToolUseID, tt.finding)
			if err != nil || resp.GetAlreadyResolved() {
				t.Fatalf("resolve: %v %v", resp, err)
			}
			res := resp.GetEntry().GetResolution()
			if res.GetResolverKind() != savepointv1.ResolverKind_RESOLVER_KIND_PERSON || res.GetResolvedBy() != "alice" || res.GetResolveTime() == nil {
				t.Fatalf("resolution %v", res)
			}
			// The same finding again is accepted; another one is refused.
			if again, err := c.ResolveEffect(ctx, id, call.ToolUseID, tt.finding); err != nil || !again.GetAlreadyResolved() {
				t.Fatalf("same finding again: %v %v", again, err)
			}
			other := tt.finding
			other.Done, other.Output = !other.Done, ""
			if _, err := c.ResolveEffect(ctx, id, call.ToolUseID, other); !errors.Is(err, client.ErrResolutionConflict) {
				t.Fatalf("another finding: %v, want ErrResolutionConflict", err)
			}

			s, err := c.Resume(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			var keys []string
			results, err := s.Reconcile(ctx, func(_ context.Context, _ client.ToolUse, k string) (string, error) {
				runs++
				keys = append(keys, k)
				return "paid", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 || results[0].Decision != tt.want || results[0].Content != tt.content || results[0].IsError {
				t.Fatalf("results %+v, want %v with %q", results, tt.want, tt.content)
			}
			if runs != tt.wantRuns || (runs == 1 && keys[0] != key) {
				t.Fatalf("ran %d times with keys %q, want %d with the key it was begun with, %q", runs, keys, tt.wantRuns, key)
			}
			if err := s.PointB(ctx, results); err != nil {
				t.Fatal(err)
			}
			sum, err := c.ListSessions(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, ss := range sum {
				if ss.GetSessionId() == id && (ss.GetResolvedByPersonCount() != 1 || ss.GetResolvedByVerifyCount() != 0) {
					t.Errorf("summary %v: want one resolution by a person", ss)
				}
			}
		})
	}
	// A call not in doubt (read-only: Reconcile runs it) is refused.
	ctx := t.Context()
	read := client.ToolUse{ToolUseID: "toolu_read", Name: "read_notes", EffectClass: client.ReadOnly}
	s, err := c.Start(ctx, "resolve-ro", "read", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(ctx, assistantFor(read), []client.ToolUse{read}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResolveEffect(ctx, "resolve-ro", read.ToolUseID, client.Finding{Done: true, Output: "x"}); !errors.Is(err, client.ErrCallNotInDoubt) {
		t.Fatalf("resolve a read-only call: %v, want ErrCallNotInDoubt", err)
	}
}

// TestDaemonVerifyInDoubt: a side-effecting tool killed after BeginEffect,
// resumed with a verify hook: done reuses the output found and the tool
// does not run again; not done runs it once more with the same key;
// unknown, or a verify that fails, leaves it in doubt as before.
func TestDaemonVerifyInDoubt(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	call := client.ToolUse{ToolUseID: "toolu_pay", Name: "send_payment", EffectClass: client.SideEffect}
	for i, tt := range []struct {
		name     string
		verified client.Verified
		err      error
		want     client.Decision
		wantRuns int
		content  string
		kind     savepointv1.ResolverKind
	}{
		{"done", client.Verified{Status: client.VerifyDone, Output: "paid, ref 42", Note: "found by key"}, nil, client.DecisionReuse, 0, "paid, ref 42", savepointv1.ResolverKind_RESOLVER_KIND_VERIFY},
		{"not done", client.Verified{Status: client.VerifyNotDone}, nil, client.DecisionRun, 1, "paid", savepointv1.ResolverKind_RESOLVER_KIND_VERIFY},
		{"unknown", client.Verified{Status: client.VerifyUnknown}, nil, client.DecisionInDoubt, 0, "", 0},
		{"verify fails", client.Verified{Status: client.VerifyDone, Output: "ignored"}, errors.New("bank API down"), client.DecisionInDoubt, 0, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			id := fmt.Sprintf("verify-%d", i)
			key := killedAfterBegin(t, c, id, call)
			s, err := c.Resume(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			var keys, asked []string
			results, err := s.ReconcileVerify(ctx, func(_ context.Context, _ client.ToolUse, k string) (string, error) {
				runs++
				keys = append(keys, k)
				return "paid", nil
			}, func(_ context.Context, cu client.ToolUse, k string) (client.Verified, error) {
				asked = append(asked, cu.ToolUseID+" "+k)
				return tt.verified, tt.err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0] != call.ToolUseID+" "+key {
				t.Fatalf("verify asked %q, want once for %s with its key", asked, call.ToolUseID)
			}
			if len(results) != 1 || results[0].Decision != tt.want || (tt.content != "" && results[0].Content != tt.content) ||
				results[0].IsError != (tt.want == client.DecisionInDoubt) {
				t.Fatalf("results %+v, want %v with %q", results, tt.want, tt.content)
			}
			if runs != tt.wantRuns || (runs == 1 && keys[0] != key) {
				t.Fatalf("ran %d times with keys %q, want %d with key %q", runs, keys, tt.wantRuns, key)
			}
			if err := s.PointB(ctx, results); err != nil {
				t.Fatal(err)
			}
			entries, err := c.Raw().ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: id})
			if err != nil || len(entries.GetEntries()) != 1 {
				t.Fatalf("ledger %v %v", entries, err)
			}
			if got := entries.GetEntries()[0].GetResolution().GetResolverKind(); got != tt.kind {
				t.Errorf("resolution by %v, want %v", got, tt.kind)
			}
		})
	}
}
