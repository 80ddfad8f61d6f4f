package core

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"time"
)

// A tool may require a person's approval. Its call is begun only against an
// approval for that exact call: its session (or thread), its tool use id
// and the digest of its name and canonical input (ThreadEffectDigest).
// Beginning it spends the approval in the same durable write, so that it is
// spent once whatever crashes and replays follow: a resumed begin of the
// same call is the same begin (the call is begun already), and a new call
// with the same input needs a new approval. A begin that finds no approval
// for its input enters the call as waiting and answers
// DecisionAwaitApproval; one that finds a denial answers DecisionDenied
// with the approver's note, for the model.

// ApprovalStatus is where a call that requires approval is.
type ApprovalStatus int

const (
	// ApprovalWaiting: a begin asked; nobody has decided yet.
	ApprovalWaiting ApprovalStatus = iota + 1
	// ApprovalApproved: approved for InputDigest; Spent once begun.
	ApprovalApproved
	// ApprovalDenied: denied; the call is not run.
	ApprovalDenied
)

func (s ApprovalStatus) String() string {
	switch s {
	case ApprovalWaiting:
		return "WAITING"
	case ApprovalApproved:
		return "APPROVED"
	case ApprovalDenied:
		return "DENIED"
	default:
		return "UNSPECIFIED"
	}
}

// The decisions a begin of a call that requires approval answers besides
// DecisionRun and DecisionReuse; Reconcile never answers them.
const (
	// DecisionAwaitApproval: no approval exists for this call and input
	// yet; nothing was begun.
	DecisionAwaitApproval Decision = iota + 4
	// DecisionDenied: a person denied the call; nothing was begun.
	DecisionDenied
)

// EffectApproval is the durable record of a decision on one call that
// requires approval, bound to the call's input digest.
type EffectApproval struct {
	Status      ApprovalStatus
	InputDigest []byte
	// RequestTime is when a begin first asked for this input; zero for a
	// decision made before any begin asked.
	RequestTime time.Time
	DecidedBy   string
	Note        string
	DecideTime  time.Time // zero while waiting
	// Spent is set by the begin that used the approval.
	Spent bool
}

// ApproveRequest is one ApproveEffect call, already validated.
type ApproveRequest struct {
	SessionID string
	ToolUseID string
	// Epoch, when set, is fenced like a save's; nil is a person's
	// decision, not fenced.
	Epoch    *uint64
	Decision ApprovalStatus // ApprovalApproved or ApprovalDenied
	// InputDigest, when set, must be the call's; nil decides for the
	// call's input as it waits (or as it is pending).
	InputDigest []byte
	DecidedBy   string
	Note        string
	RequestID   string // empty disables retry detection
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *ApproveRequest) Fingerprint() []byte {
	fenced, epoch := uint64(0), uint64(0)
	if r.Epoch != nil {
		fenced, epoch = 1, *r.Epoch
	}
	return digest("approve", r.SessionID, r.ToolUseID, fenced, epoch, uint64(r.Decision), string(r.InputDigest), r.DecidedBy, r.Note)
}

// ApproveResult is what ApproveEffect returns: the call's ledger entry
// after it, and whether this decision had been recorded before.
type ApproveResult struct {
	Entry          LedgerEntry
	AlreadyDecided bool
}

// BeginRequest is one BeginEffect call without a tool use, already
// validated.
type BeginRequest struct {
	SessionID string
	ToolUseID string
	Epoch     uint64 // fenced like a save's
	// RequiresApproval gates the begin on an approval for the call's input
	// as saved pending.
	RequiresApproval bool
	// RequestID (AIP-155), when set, makes a retry get the first answer
	// (Begin); empty disables retry detection.
	RequestID string
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *BeginRequest) Fingerprint() []byte {
	var approval uint64
	if r.RequiresApproval {
		approval = 1
	}
	return digest("begin", r.SessionID, r.Epoch, r.ToolUseID, approval)
}

// decideApproval records a decision on a (the current approval record,
// nil when none) for the call whose input digest is current. It returns
// the record to store, nil with already set for the same decision again,
// or a refusal: the digest given is not the call's
// (ErrApprovalInputMismatch), or another decision was made
// (ErrApprovalConflict); what names the call in its message.
func decideApproval(a *EffectApproval, current []byte, decision ApprovalStatus, given []byte, by, note string, now time.Time, what string) (next *EffectApproval, already bool, refusal error, msg string) {
	if given != nil && !bytes.Equal(given, current) {
		return nil, false, ErrApprovalInputMismatch, fmt.Sprintf("%s has input digest %s, not %s; the approver saw other input: look at the call again",
			what, hex.EncodeToString(current), hex.EncodeToString(given))
	}
	if a != nil && a.Status != ApprovalWaiting && bytes.Equal(a.InputDigest, current) {
		if a.Status != decision {
			return nil, false, ErrApprovalConflict, fmt.Sprintf("%s was %s already by %q at %s; the first decision stands",
				what, a.Status, a.DecidedBy, a.DecideTime.UTC().Format(time.RFC3339))
		}
		return nil, true, nil, ""
	}
	n := &EffectApproval{Status: decision, InputDigest: current, DecidedBy: by, Note: note, DecideTime: now}
	if a != nil && a.Status == ApprovalWaiting && bytes.Equal(a.InputDigest, current) {
		n.RequestTime = a.RequestTime
	}
	return n, false, nil, ""
}

// gateApproval applies a begin of a call that requires approval, whose
// input digest is d, to its approval record a. It returns the decision,
// DecisionRun when an unspent approval for d exists (the caller begins the
// call and stores next, now spent), and the record to store, nil when
// nothing changes.
func gateApproval(a *EffectApproval, d []byte, now time.Time) (dec Decision, next *EffectApproval) {
	if a != nil && bytes.Equal(a.InputDigest, d) {
		switch a.Status {
		case ApprovalApproved:
			if !a.Spent {
				n := *a
				n.Spent = true
				return DecisionRun, &n
			}
			// Spent by a begin of this very call: only a call begun already
			// can have spent it, so this is not reached from a begin of a
			// call not begun; refuse to run it again.
			return DecisionAwaitApproval, &EffectApproval{Status: ApprovalWaiting, InputDigest: d, RequestTime: now}
		case ApprovalDenied:
			return DecisionDenied, nil
		case ApprovalWaiting:
			return DecisionAwaitApproval, nil
		}
	}
	// None, or a decision for other input: that does not unlock this one.
	return DecisionAwaitApproval, &EffectApproval{Status: ApprovalWaiting, InputDigest: d, RequestTime: now}
}

// waitingDelta is the change in a session's count of calls waiting for
// approval when a call's record goes from a to n.
func waitingDelta(a, n *EffectApproval) int {
	w := func(x *EffectApproval) int {
		if x != nil && x.Status == ApprovalWaiting {
			return 1
		}
		return 0
	}
	return w(n) - w(a)
}

// addWaiting applies a waitingDelta to the head's count.
func addWaiting(h *HeadRecord, d int) {
	switch {
	case d > 0:
		h.AwaitingApproval++
	case d < 0 && h.AwaitingApproval > 0:
		h.AwaitingApproval--
	}
}

// pendingInput returns the latest revision's pending tool use id names, or
// nil when it is not pending there.
func pendingInput(t Txn, h *HeadRecord, sessionID, toolUseID string) (*ToolUse, error) {
	rev, err := t.Revision(sessionID, h, 0)
	if err != nil {
		return nil, err
	}
	for i := range rev.Pending {
		if rev.Pending[i].ID == toolUseID {
			return &rev.Pending[i], nil
		}
	}
	return nil, nil
}

// Approve records a person's (or the owner's) decision on a call that
// requires approval, for its input digest as it waits, or, for a call
// pending in the latest revision that no begin asked about yet, as saved.
// The checks run in order: request id, epoch (when given), the call, the
// digest given (ErrApprovalInputMismatch), a decision made before (the same
// again answers AlreadyDecided; another is ErrApprovalConflict), then that
// the call can take one (ErrApprovalNotWaiting: begun without approval, or
// recorded).
func Approve(t Txn, req *ApproveRequest, now time.Time) (ApproveResult, error) {
	sid := req.SessionID
	h, err := MustHead(t, sid)
	if err != nil {
		return ApproveResult{}, err
	}
	fp := req.Fingerprint()
	prev, err := Replay(t, h, sid, req.RequestID, fp)
	if err != nil {
		return ApproveResult{}, err
	}
	if req.Epoch != nil && prev == nil {
		if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, *req.Epoch); err != nil {
			return ApproveResult{}, err
		}
	}
	c, err := t.LedgerEntry(sid, req.ToolUseID)
	if err != nil {
		return ApproveResult{}, err
	}
	if c == nil {
		return ApproveResult{}, fmt.Errorf("%w: tool use %q is unknown to session %q: it is neither pending nor waiting for approval",
			ErrCallUnknown, req.ToolUseID, sid)
	}
	if prev != nil {
		return ApproveResult{Entry: *c}, nil
	}
	what := fmt.Sprintf("tool use %q of session %q", req.ToolUseID, sid)
	a := c.Approval
	var current []byte
	switch {
	case a != nil && a.Status == ApprovalWaiting:
		current = a.InputDigest
	case c.Begun || c.Effect != nil:
		if a != nil && bytes.Equal(req.InputDigest, a.InputDigest) || a != nil && req.InputDigest == nil {
			current = a.InputDigest // a decision on it again: the same answers already, another conflicts
			break
		}
		why := "it was begun without approval"
		if c.Effect != nil && !c.Begun {
			why = "its effect is recorded"
		}
		return ApproveResult{}, &StateError{Err: ErrApprovalNotWaiting, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("%s does not wait for approval: %s", what, why)}
	default:
		u, err := pendingInput(t, h, sid, req.ToolUseID)
		if err != nil {
			return ApproveResult{}, err
		}
		if u == nil {
			if a != nil {
				current = a.InputDigest
				break
			}
			return ApproveResult{}, &StateError{Err: ErrApprovalNotWaiting, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("%s neither waits for approval nor is pending in revision %d", what, h.Revision)}
		}
		if current, err = ThreadEffectDigest(u.Name, u.InputJSON); err != nil {
			return ApproveResult{}, Corrupt(h, sid, fmt.Errorf("pending tool use %q: input_json: %v", u.ID, err))
		}
	}
	next, already, refusal, msg := decideApproval(a, current, req.Decision, req.InputDigest, req.DecidedBy, req.Note, now, what)
	if refusal != nil {
		return ApproveResult{}, &StateError{Err: refusal, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch, Msg: msg}
	}
	if already {
		return ApproveResult{Entry: *c, AlreadyDecided: true}, nil
	}
	if c.Begun || c.Effect != nil {
		// A decision on a call begun with approval can only repeat the one
		// made; decideApproval answered it above.
		return ApproveResult{}, &StateError{Err: ErrApprovalNotWaiting, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("%s was begun already", what)}
	}
	addWaiting(h, waitingDelta(a, next))
	setApproval(&c.Approval, &c.EarlierApprovals, next)
	if err := t.PutLedgerEntry(sid, c); err != nil {
		return ApproveResult{}, err
	}
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch}); err != nil {
			return ApproveResult{}, err
		}
	}
	return ApproveResult{Entry: *c}, t.PutHead(sid, h)
}
