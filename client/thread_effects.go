package client

import (
	"context"
	"fmt"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ThreadEffects returns the whole ledger of a graph thread, every page of
// ListThreadEffects, in (checkpoint_ns, tool_use_id) order; a thread
// without one has none. Like the RPC, it writes nothing.
func (c *Client) ThreadEffects(ctx context.Context, thread string) ([]*savepointv1.ThreadEffect, error) {
	g := c.Graph()
	var out []*savepointv1.ThreadEffect
	for token, first := "", true; first || token != ""; first = false {
		page, err := g.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: thread, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.GetEffects()...)
		token = page.GetNextPageToken()
	}
	return out, nil
}

// NextBegin says what BeginThreadEffect would answer now for the call e
// records, a graph node running it again after a crash or a replay, and
// why, in one sentence: the thread ledger's rules (docs/api.md) applied to
// one entry.
func NextBegin(e *savepointv1.ThreadEffect) (savepointv1.Decision, string) {
	if d := e.GetDuplicateOf(); d != "" {
		return savepointv1.Decision_DECISION_IN_DOUBT, fmt.Sprintf("never ran: it repeats %s, the same call of an earlier, interrupted run; "+
			"the model is told that call's outcome (REUSE once it is recorded)", d)
	}
	switch e.GetState() {
	case savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_NOT_BEGUN:
		a := e.GetApproval()
		switch a.GetStatus() {
		case savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
			return savepointv1.Decision_DECISION_RUN, "approved by " + orUnknown(a.GetDecidedBy()) + "; the next begin runs attempt 1 and spends the approval"
		case savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED:
			return savepointv1.Decision_DECISION_DENIED, "denied by " + orUnknown(a.GetDecidedBy()) + "; the model is given the note as the tool result"
		}
		return savepointv1.Decision_DECISION_AWAIT_APPROVAL, "waits for approval (savepoint approve --thread); nothing has run"
	case savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED:
		return savepointv1.Decision_DECISION_REUSE, fmt.Sprintf("attempt %d returned a result; it is returned without running the tool", e.GetAttempts())
	case savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED:
		return savepointv1.Decision_DECISION_RUN, fmt.Sprintf("attempt %d raised; a retry runs attempt %d under the same idempotency key", e.GetAttempts(), e.GetAttempts()+1)
	}
	if r := e.GetResolution(); r.GetOutcome() == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE && !r.GetRetryBegun() {
		return savepointv1.Decision_DECISION_RUN, fmt.Sprintf("attempt %d was resolved as not done; attempt %d runs under the same idempotency key", e.GetAttempts(), e.GetAttempts()+1)
	}
	switch e.GetEffectClass() {
	case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return savepointv1.Decision_DECISION_RUN, fmt.Sprintf("attempt %d began without an outcome; the tool is read-only, so it runs again", e.GetAttempts())
	case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return savepointv1.Decision_DECISION_RUN, fmt.Sprintf("attempt %d began without an outcome; the tool is idempotent, so it runs again under the same idempotency key", e.GetAttempts())
	}
	return savepointv1.Decision_DECISION_IN_DOUBT, fmt.Sprintf("attempt %d began without an outcome and the tool has side effects: it may have run; the model is told to check before retrying", e.GetAttempts())
}

func orUnknown(s string) string {
	if s == "" {
		return "someone"
	}
	return s
}
