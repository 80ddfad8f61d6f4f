package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestRegisterToolUseCrash drives the hooks' protocol through the daemon:
// calls registered one at a time and in parallel, one recorded, one
// refused, one killed inside the tool; after a takeover ReconcileToolUses
// reuses, reports refusals as recorded, leaves only the killed call in
// doubt, and says RUN for a call never registered.
func TestRegisterToolUseCrash(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	ctx := t.Context()
	s, err := c.Start(ctx, "hooks", "write the report", nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := []client.ToolUse{
		{ToolUseID: "read", Name: "read_notes", EffectClass: client.ReadOnly},
		{ToolUseID: "write", Name: "write_report"},
		{ToolUseID: "send", Name: "send_mail"},
		{ToolUseID: "killed", Name: "write_report"},
	}
	var wg sync.WaitGroup
	regs := make([]client.Registration, len(calls))
	errs := make([]error, len(calls))
	for i, call := range calls {
		wg.Go(func() { regs[i], errs[i] = s.RegisterToolUse(ctx, call) })
	}
	wg.Wait()
	for i := range calls {
		if errs[i] != nil || regs[i].IdempotencyKey == "" || regs[i].AlreadyBegun || regs[i].Effect != nil {
			t.Fatalf("register %s: %+v %v", calls[i].ToolUseID, regs[i], errs[i])
		}
	}
	if _, err := s.RecordToolUse(ctx, "read", "notes", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordToolUse(ctx, "write", "written", false); err != nil {
		t.Fatal(err)
	}
	if e, err := s.RefuseToolUse(ctx, "send", "denied by the permission check"); err != nil || !e.GetRefused() || !e.GetIsError() {
		t.Fatalf("refuse: %v %v", e, err)
	}
	// A recorded call registered again is answered with its outcome.
	if r, err := s.RegisterToolUse(ctx, calls[1]); err != nil || r.Effect.GetOutput() != "written" {
		t.Fatalf("register a recorded call: %+v %v", r, err)
	}

	// The process is killed inside "killed"; another takes over.
	r, err := c.Resume(ctx, "hooks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterToolUse(ctx, client.ToolUse{ToolUseID: "late", Name: "write_report"}); !errors.Is(err, client.ErrSessionFenced) {
		t.Fatalf("the old owner registered: %v", err)
	}
	res, err := r.ReconcileToolUses(ctx, []string{"read", "write", "send", "killed", "never"})
	if err != nil {
		t.Fatal(err)
	}
	want := []savepointv1.Decision{client.DecisionReuse, client.DecisionReuse, client.DecisionReuse, client.DecisionInDoubt, client.DecisionRun}
	for i, d := range res {
		if d.GetDecision() != want[i] {
			t.Errorf("%s: %v, want %v", d.GetToolUse().GetToolUseId(), d.GetDecision(), want[i])
		}
	}
	if !res[2].GetEffect().GetRefused() || !strings.Contains(res[3].GetToolResultText(), "unknown") {
		t.Fatalf("refusal %v, in doubt %q", res[2].GetEffect(), res[3].GetToolResultText())
	}
	// Bad input gets its reason and changes nothing.
	_, err = c.Raw().BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "hooks", ToolUseId: "x", ToolUse: &savepointv1.ToolUse{ToolUseId: "y", Name: "w"}})
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "tool_use_id") {
		t.Fatalf("mismatched ids: %v", err)
	}
	_, err = r.ReconcileToolUses(ctx, []string{"read", "read"})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("duplicate ids: %v", err)
	}
}

// TestReconcileToolUsesPages pages through resolutions whose recorded
// outputs do not fit one response, and refuses a token with another list.
func TestReconcileToolUsesPages(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	ctx := context.Background()
	s, err := c.Start(ctx, "pages", "fetch", nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("o", 1900<<10)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if _, err := s.RegisterToolUse(ctx, client.ToolUse{ToolUseID: id, Name: "fetch", EffectClass: client.ReadOnly}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordToolUse(ctx, id, big, false); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.ReconcileToolUses(ctx, ids)
	if err != nil || len(res) != 3 {
		t.Fatalf("%d resolutions, %v", len(res), err)
	}
	for i, r := range res {
		if r.GetToolUse().GetToolUseId() != ids[i] || r.GetEffect().GetOutput() != big {
			t.Fatalf("resolution %d: %s", i, r.GetToolUse().GetToolUseId())
		}
	}
	page, err := c.Raw().Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "pages", ToolUseIds: ids})
	if err != nil || page.GetNextPageToken() == "" {
		t.Fatalf("first page: %v", err)
	}
	_, err = c.Raw().Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "pages", ToolUseIds: ids[:2], PageToken: page.GetNextPageToken()})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a token with another list: %v", err)
	}
}
