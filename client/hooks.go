package client

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Registration is what RegisterToolUse returns: the call's idempotency key,
// whether it had been begun before, and, for a call whose outcome is
// recorded already, that outcome (Effect set): the tool must not run again.
// Duplicate is set when the daemon's duplicate-intent guard caught the call
// (it repeats a call an earlier, interrupted run made): the tool must not
// run; answer the model with Duplicate.ToolResultText (an error result when
// Duplicate.IsError).
type Registration struct {
	IdempotencyKey string
	AlreadyBegun   bool
	Effect         *savepointv1.Effect
	Duplicate      *savepointv1.DuplicateToolUse
}

// RegisterToolUse makes call pending and begun in one durable write
// (BeginEffect with tool_use), without a Point A or a new revision, for
// code that sees one call at a time just before it runs, such as an agent
// framework's hooks; calls of one turn may register in parallel. Run the
// tool only when the returned Effect and Duplicate are nil, then
// RecordToolUse its outcome.
// A retry after an unknown outcome is sent with the same request id.
func (s *Session) RegisterToolUse(ctx context.Context, call ToolUse) (Registration, error) {
	s.mu.Lock()
	epoch := s.epoch
	s.mu.Unlock()
	p := &savepointv1.ToolUse{Name: call.Name, InputJson: call.InputJSON, EffectClass: effectiveClass(call.EffectClass), BeginTracked: true,
		Repeatable: call.Repeatable}
	b, err := s.c.raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{
		SessionId: s.id, ToolUseId: call.ToolUseID, Epoch: epoch, ToolUse: p, RequestId: uuid.NewString(),
	})
	if err != nil {
		return Registration{}, fmt.Errorf("savepoint: registering tool use %q (%s): %w", call.ToolUseID, call.Name, err)
	}
	return Registration{IdempotencyKey: b.GetIdempotencyKey(), AlreadyBegun: b.GetAlreadyBegun(), Effect: b.GetEffect(), Duplicate: b.GetDuplicate()}, nil
}

// RecordToolUse writes the outcome of a tool use that ran to the ledger
// (RecordEffect), whatever the session's epoch; the first record stands.
// isError marks a tool that ran and failed.
func (s *Session) RecordToolUse(ctx context.Context, toolUseID, output string, isError bool) (*savepointv1.Effect, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	r, err := s.c.raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: s.id, ToolUseId: toolUseID, Output: output, IsError: isError})
	if err != nil {
		return nil, err
	}
	return r.GetEffect(), nil
}

// RefuseToolUse records that a tool use was refused before it ran (a
// permission check said no), with reason as its error output: Reconcile then
// reuses the refusal instead of reporting the call in doubt.
func (s *Session) RefuseToolUse(ctx context.Context, toolUseID, reason string) (*savepointv1.Effect, error) {
	r, err := s.c.raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: s.id, ToolUseId: toolUseID, Output: reason, IsError: true, Refused: true})
	if err != nil {
		return nil, err
	}
	return r.GetEffect(), nil
}

// ReconcileToolUses decides the named tool uses from the ledger (Reconcile
// with tool_use_ids), every page in one slice, in the order given: for
// calls registered with RegisterToolUse and left without a result in a
// framework's own transcript. A call the ledger does not know was never
// begun (DECISION_RUN). It writes and runs nothing.
func (s *Session) ReconcileToolUses(ctx context.Context, toolUseIDs []string) ([]*savepointv1.Resolution, error) {
	var out []*savepointv1.Resolution
	for token, first := "", true; first || token != ""; first = false {
		page, err := s.c.raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.id, ToolUseIds: toolUseIDs, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.GetResolutions()...)
		token = page.GetNextPageToken()
	}
	return out, nil
}
