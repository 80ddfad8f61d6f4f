package client

import (
	"context"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Approval is a person's decision on a tool use that requires approval.
type Approval struct {
	// Deny denies the call: it is not run, and Note is the tool result the
	// model is given. When false the call is approved.
	Deny bool
	// Note is kept with the decision; for a denial, the model reads it.
	Note string
	// DecidedBy names who decided, such as a user name.
	DecidedBy string
	// InputDigest, when set, is the digest of the input the approver saw
	// (the call's approval.input_digest, as ListEffects shows it): the
	// daemon refuses the decision with ErrApprovalInputMismatch when the
	// call waits with other input. Nil decides for the input the call waits
	// with.
	InputDigest []byte
}

func (d Approval) status() savepointv1.ApprovalStatus {
	if d.Deny {
		return savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED
	}
	return savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
}

// ApproveEffect records a person's decision on a tool use of session
// sessionID that waits for approval (or is pending and not begun), without
// an epoch, with a fresh request id so that a retry is answered as the
// first try was. A begin of the call with the approval's input spends it
// once; a denial answers every begin of it with DECISION_DENIED and the
// note. It returns the call's ledger entry after it, and whether the same
// decision was made before; another decision made before is
// ErrApprovalConflict, a call begun without approval ErrApprovalNotWaiting.
func (c *Client) ApproveEffect(ctx context.Context, sessionID, toolUseID string, d Approval) (*savepointv1.ApproveEffectResponse, error) {
	return c.raw.ApproveEffect(ctx, &savepointv1.ApproveEffectRequest{
		SessionId: sessionID, ToolUseId: toolUseID, Decision: d.status(), InputDigest: d.InputDigest,
		DecidedBy: d.DecidedBy, Note: d.Note, RequestId: uuid.NewString(),
	})
}

// ApproveThreadEffect records a person's decision on a graph thread's call
// that waits for approval (namespace ns, "" for the root graph), as
// ApproveEffect does for a session's.
func (c *Client) ApproveThreadEffect(ctx context.Context, thread, ns, toolUseID string, d Approval) (*savepointv1.ApproveThreadEffectResponse, error) {
	return c.Graph().ApproveThreadEffect(ctx, &savepointv1.ApproveThreadEffectRequest{
		ThreadId: thread, CheckpointNs: ns, ToolUseId: toolUseID, Decision: d.status(), InputDigest: d.InputDigest,
		DecidedBy: d.DecidedBy, Note: d.Note, RequestId: uuid.NewString(),
	})
}
