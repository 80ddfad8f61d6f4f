package client

import (
	"context"
	"encoding/json"

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

// ResolveThreadEffect records a person's finding about a graph thread's
// call in doubt (namespace ns, "" for the root graph), as ResolveEffect
// does for a session's. A done call's Output is recorded as a JSON string
// (TypedValue type "json"), which LangGraph's serializer reads back as the
// text. It returns the daemon's answer: the entry after it, and whether the
// same finding was recorded before.
func (c *Client) ResolveThreadEffect(ctx context.Context, thread, ns, toolUseID string, f Finding) (*savepointv1.ResolveThreadEffectResponse, error) {
	r := f.request("", toolUseID, savepointv1.ResolverKind_RESOLVER_KIND_PERSON)
	req := &savepointv1.ResolveThreadEffectRequest{
		ThreadId: thread, CheckpointNs: ns, ToolUseId: toolUseID, Outcome: r.Outcome, IsError: f.IsError,
		Note: f.Note, ResolverKind: r.ResolverKind, ResolvedBy: f.ResolvedBy, RequestId: r.RequestId,
	}
	if f.Done {
		data, err := json.Marshal(f.Output)
		if err != nil {
			return nil, err
		}
		req.Output = &savepointv1.TypedValue{Type: "json", Data: data}
	}
	return c.Graph().ResolveThreadEffect(ctx, req)
}
