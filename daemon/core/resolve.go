package core

import (
	"fmt"
	"time"
)

// ResolutionOutcome is what was found about a call in doubt.
type ResolutionOutcome int

const (
	// ResolvedDone: the call took effect; its output becomes its effect.
	ResolvedDone ResolutionOutcome = iota + 1
	// ResolvedNotDone: the call did not take effect; Reconcile runs it
	// again with its idempotency key.
	ResolvedNotDone
)

func (o ResolutionOutcome) String() string {
	switch o {
	case ResolvedDone:
		return "DONE"
	case ResolvedNotDone:
		return "NOT_DONE"
	default:
		return "UNSPECIFIED"
	}
}

// ResolverKind says who or what resolved a call in doubt.
type ResolverKind int

const (
	// ResolverVerify is a tool's verify hook, run by a resuming client.
	ResolverVerify ResolverKind = iota + 1
	// ResolverPerson is a person, by the CLI, the inspector or the API.
	ResolverPerson
)

func (k ResolverKind) String() string {
	switch k {
	case ResolverVerify:
		return "VERIFY"
	case ResolverPerson:
		return "PERSON"
	default:
		return "UNSPECIFIED"
	}
}

// EffectResolution is the durable record that a call in doubt was settled.
type EffectResolution struct {
	Outcome      ResolutionOutcome
	ResolverKind ResolverKind
	ResolvedBy   string
	Note         string
	// ResolveTime is set by the store; zero on input.
	ResolveTime time.Time
	// RetryBegun is set, for a NOT_DONE resolution, by the BeginEffect of
	// the new attempt it allowed: if that attempt's outcome is not recorded
	// either, the call is in doubt again, and may be resolved again.
	RetryBegun bool
}

// ResolveRequest is one ResolveEffect call, already validated.
type ResolveRequest struct {
	SessionID string
	ToolUseID string
	// Epoch, when set, is fenced like a save's; nil is a person's finding,
	// not fenced.
	Epoch        *uint64
	Outcome      ResolutionOutcome
	Output       string // for ResolvedDone
	IsError      bool   // for ResolvedDone
	Note         string
	ResolverKind ResolverKind
	ResolvedBy   string
	RequestID    string // empty disables retry detection
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *ResolveRequest) Fingerprint() []byte {
	fenced, epoch := uint64(0), uint64(0)
	if r.Epoch != nil {
		fenced, epoch = 1, *r.Epoch
	}
	isErr := uint64(0)
	if r.IsError {
		isErr = 1
	}
	return digest("resolve", r.SessionID, r.ToolUseID, fenced, epoch, uint64(r.Outcome), r.Output, isErr,
		r.Note, uint64(r.ResolverKind), r.ResolvedBy)
}

// ResolveResult is what ResolveEffect returns: the call's ledger entry
// after it, and whether this finding had been recorded before.
type ResolveResult struct {
	Entry           LedgerEntry
	AlreadyResolved bool
}

// Resolve settles a call in doubt, once per attempt: once the new attempt
// a NOT_DONE resolution allowed is begun, that resolution is spent, and a
// call whose new attempt left no record is in doubt again, its new
// resolution replacing the old one. A DONE finding records its output as
// the call's effect, marked with the resolution; a NOT_DONE one is kept on
// the call, and Reconcile then answers RUN with the call's idempotency key.
// The checks run in order: request id, epoch (when given), the call, a
// resolution made before (the same finding again answers AlreadyResolved
// with the first record, whoever made it; another is
// ErrResolutionConflict), then that the call is in doubt as Reconcile
// decides it now (ErrCallNotInDoubt otherwise).
func Resolve(t Txn, req *ResolveRequest, now time.Time) (ResolveResult, error) {
	sid := req.SessionID
	h, err := MustHead(t, sid)
	if err != nil {
		return ResolveResult{}, err
	}
	fp := req.Fingerprint()
	prev, err := Replay(t, h, sid, req.RequestID, fp)
	if err != nil {
		return ResolveResult{}, err
	}
	if req.Epoch != nil && prev == nil {
		if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, *req.Epoch); err != nil {
			return ResolveResult{}, err
		}
	}
	c, err := t.LedgerEntry(sid, req.ToolUseID)
	if err != nil {
		return ResolveResult{}, err
	}
	if c == nil {
		return ResolveResult{}, fmt.Errorf("%w: tool use %q was never pending in session %q", ErrCallUnknown, req.ToolUseID, sid)
	}
	if prev != nil {
		// A retry of a request that wrote: the call holds what it wrote,
		// since any other finding since would have been refused.
		return ResolveResult{Entry: *c}, nil
	}
	if r := c.Resolution; r != nil && !r.RetryBegun {
		if r.Outcome != req.Outcome || (req.Outcome == ResolvedDone && (c.Effect == nil || c.Effect.Output != req.Output || c.Effect.IsError != req.IsError)) {
			return ResolveResult{}, &StateError{Err: ErrResolutionConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q was resolved %s already by %s %q at %s, with another finding; the first resolution stands",
					req.ToolUseID, r.Outcome, r.ResolverKind, r.ResolvedBy, r.ResolveTime.UTC().Format(time.RFC3339))}
		}
		return ResolveResult{Entry: *c, AlreadyResolved: true}, nil
	}
	pc := PendingToolUse{ToolUse: ToolUse{ID: c.ToolUseID, Name: c.Name, Class: c.Class, BeginTracked: c.BeginTracked},
		Begun: c.Begun, IdempotencyKey: c.IdempotencyKey, Effect: c.Effect}
	if c.LastPendingRevision != h.Revision || Reconcile([]PendingToolUse{pc})[0].Decision != DecisionInDoubt {
		return ResolveResult{}, &StateError{Err: ErrCallNotInDoubt, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("tool use %q of session %q is not in doubt (%s); only a side-effecting call pending in the latest revision, "+
				"begun or not begin-tracked, with no recorded effect can be resolved", req.ToolUseID, sid, notInDoubtWhy(c, pc, h))}
	}
	res := &EffectResolution{Outcome: req.Outcome, ResolverKind: req.ResolverKind, ResolvedBy: req.ResolvedBy, Note: req.Note, ResolveTime: now}
	setResolution(&c.Resolution, &c.EarlierResolutions, res)
	if req.Outcome == ResolvedDone {
		c.Effect = &Effect{ToolUseID: c.ToolUseID, Name: c.Name, Output: req.Output, IsError: req.IsError, RecordTime: now, Resolution: res}
	}
	switch req.ResolverKind {
	case ResolverVerify:
		h.ResolvedByVerify++
	case ResolverPerson:
		h.ResolvedByPerson++
	}
	if err := t.PutLedgerEntry(sid, c); err != nil {
		return ResolveResult{}, err
	}
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch}); err != nil {
			return ResolveResult{}, err
		}
	}
	return ResolveResult{Entry: *c}, t.PutHead(sid, h)
}

// notInDoubtWhy says why Resolve refuses a call, for its error message.
func notInDoubtWhy(c *LedgerEntry, pc PendingToolUse, h *HeadRecord) string {
	switch {
	case c.Effect != nil:
		return "its effect is recorded"
	case c.LastPendingRevision != h.Revision:
		return fmt.Sprintf("it is not pending in the latest revision, %d", h.Revision)
	case pc.Class != SideEffect:
		return fmt.Sprintf("it is %s: Reconcile runs it again", pc.Class)
	default:
		return "it is begin-tracked and was never begun: Reconcile runs it"
	}
}
