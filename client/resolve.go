package client

import (
	"context"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Finding is what was found about a tool use in doubt: whether it took
// effect and, if it did, its outcome.
type Finding struct {
	// Done reports that the call took effect; Output and IsError are then
	// its outcome, recorded as the call's effect. When false, Reconcile runs
	// the call again with its idempotency key, and Output and IsError must be
	// empty.
	Done    bool
	Output  string
	IsError bool
	// Note is kept with the resolution, such as where the finding came from.
	Note string
	// ResolvedBy names who resolved the call, such as a user name.
	ResolvedBy string
}

// request is f as a ResolveEffectRequest with a fresh request id, so that a
// retry of it is answered as the first try was.
func (f Finding) request(sessionID, toolUseID string, kind savepointv1.ResolverKind) *savepointv1.ResolveEffectRequest {
	req := &savepointv1.ResolveEffectRequest{
		SessionId: sessionID, ToolUseId: toolUseID, Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE,
		Output: f.Output, IsError: f.IsError, Note: f.Note, ResolverKind: kind, ResolvedBy: f.ResolvedBy,
		RequestId: uuid.NewString(),
	}
	if f.Done {
		req.Outcome = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE
	}
	return req
}

// ResolveEffect records a person's finding about a tool use in doubt in
// session sessionID, without an epoch: a finding is a fact, accepted from
// whoever has access to the daemon. It returns the daemon's answer: the
// call's ledger entry after it, and whether the same finding was recorded
// before. A call not in doubt is ErrCallNotInDoubt; one resolved otherwise
// already, ErrResolutionConflict.
func (c *Client) ResolveEffect(ctx context.Context, sessionID, toolUseID string, f Finding) (*savepointv1.ResolveEffectResponse, error) {
	return c.raw.ResolveEffect(ctx, f.request(sessionID, toolUseID, savepointv1.ResolverKind_RESOLVER_KIND_PERSON))
}
