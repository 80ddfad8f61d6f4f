package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Begin marks a call pending in the latest revision as dispatched, giving it
// a new idempotency key the first time. A call that requires approval
// (req.RequiresApproval, or an approval record on the call) is begun only
// against an unspent approval for its input as saved pending, which the
// begin spends; otherwise it answers DecisionAwaitApproval, entering the
// call as waiting, or DecisionDenied, beginning nothing.
//
// With req.RequestID, a retry with the same request id and payload is
// answered as the first begin that began the call was (already_begun as
// it was then), from the request's record written with the begin in one
// write, so that a retry of a begin whose commit's answer was lost
// (COMMIT_OUTCOME_UNKNOWN) is not answered already_begun; the id with
// another payload is ErrRequestIDReused. A begin that did not begin the
// call (gated by approval) stores no record: its retry is decided afresh.
func Begin(t Txn, req *BeginRequest, now time.Time) (BeginResult, error) {
	sessionID, toolUseID := req.SessionID, req.ToolUseID
	h, err := MustHead(t, sessionID)
	if err != nil {
		return BeginResult{}, err
	}
	if req.RequestID == "" {
		return begin(t, h, req, now)
	}
	fp := req.Fingerprint()
	r, err := t.Request(sessionID, req.RequestID)
	if err != nil {
		return BeginResult{}, err
	}
	if r != nil {
		if string(r.Fingerprint) != string(fp) {
			return BeginResult{}, fmt.Errorf("%w: request id %s was already used for a different request of session %q; make a new id for a new request",
				ErrRequestIDReused, req.RequestID, sessionID)
		}
		c, err := t.LedgerEntry(sessionID, toolUseID)
		if err != nil {
			return BeginResult{}, err
		}
		if c == nil || !c.Begun {
			return BeginResult{}, Corrupt(h, sessionID, fmt.Errorf("request %s began tool use %q, which the ledger does not hold begun", req.RequestID, toolUseID))
		}
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: r.AlreadyBegun, Decision: DecisionRun, Approval: c.Approval}, nil
	}
	res, err := begin(t, h, req, now)
	if err != nil || res.Decision != DecisionRun {
		return res, err
	}
	return res, t.PutRequest(sessionID, &RequestRecord{
		RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch, AlreadyBegun: res.AlreadyBegun,
	})
}

func begin(t Txn, h *HeadRecord, req *BeginRequest, now time.Time) (BeginResult, error) {
	sessionID, toolUseID := req.SessionID, req.ToolUseID
	if err := Fence(sessionID, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
		return BeginResult{}, err
	}
	if err := Active(h, sessionID); err != nil {
		return BeginResult{}, err
	}
	c, err := t.LedgerEntry(sessionID, toolUseID)
	if err != nil {
		return BeginResult{}, err
	}
	if c == nil || c.LastPendingRevision != h.Revision {
		return BeginResult{}, &StateError{Err: ErrCallNotPending, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("tool use %q is not pending in revision %d of session %q; save it as pending at Point A first", toolUseID, h.Revision, sessionID)}
	}
	if c.Effect != nil {
		return BeginResult{}, &StateError{Err: ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("tool use %q already has a recorded effect; reuse it instead of running the tool again", toolUseID)}
	}
	if c.DuplicateOf != "" {
		d, err := caughtDuplicate(t, sessionID, h, c)
		if err != nil {
			return BeginResult{}, err
		}
		return d.result(false, nil)
	}
	if d, err := catchDuplicate(t, sessionID, h, c); err != nil || d != nil {
		if err != nil {
			return BeginResult{}, err
		}
		return d.result(false, nil)
	}
	if r := c.Resolution; r != nil && r.Outcome == ResolvedNotDone && !r.RetryBegun {
		// The new attempt a NOT_DONE resolution allowed: from now on its
		// outcome is unknown again until recorded.
		r.RetryBegun = true
		if c.Begun {
			c.BeginTime = now
			return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true, Decision: DecisionRun, Approval: c.Approval}, t.PutLedgerEntry(sessionID, c)
		}
	}
	if c.Begun {
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true, Decision: DecisionRun, Approval: c.Approval}, nil
	}
	if req.RequiresApproval || c.Approval != nil {
		u, err := pendingInput(t, h, sessionID, toolUseID)
		if err != nil {
			return BeginResult{}, err
		}
		if u == nil {
			return BeginResult{}, Corrupt(h, sessionID, fmt.Errorf("tool use %q is pending in revision %d by its ledger entry, not by the revision", toolUseID, h.Revision))
		}
		if res, gated, err := gate(t, h, sessionID, c, u.Name, u.InputJSON, now); err != nil || gated {
			return res, err
		}
	}
	key, err := newIdempotencyKey()
	if err != nil {
		return BeginResult{}, err
	}
	c.Begun = true
	c.IdempotencyKey = key
	c.BeginTime = now
	c.stampRun(h)
	return BeginResult{IdempotencyKey: c.IdempotencyKey, Decision: DecisionRun, Approval: c.Approval}, t.PutLedgerEntry(sessionID, c)
}

// gate applies a begin of c, not begun, that requires approval, with the
// given name and input. When an unspent approval for the input exists it
// marks it spent on c, which the caller then begins and stores, and
// returns gated false; otherwise it stores what changed (the call entered
// as waiting) and returns the answer with gated true.
func gate(t Txn, h *HeadRecord, sessionID string, c *LedgerEntry, name, inputJSON string, now time.Time) (res BeginResult, gated bool, err error) {
	d, err := ThreadEffectDigest(name, inputJSON)
	if err != nil {
		return BeginResult{}, true, fmt.Errorf("%w: input_json of tool use %q: %v", ErrInvalidArgument, c.ToolUseID, err)
	}
	dec, next := gateApproval(c.Approval, d, now)
	if dec == DecisionRun {
		setApproval(&c.Approval, &c.EarlierApprovals, next)
		return BeginResult{}, false, nil
	}
	if next != nil {
		addWaiting(h, waitingDelta(c.Approval, next))
		setApproval(&c.Approval, &c.EarlierApprovals, next)
		if err := t.PutLedgerEntry(sessionID, c); err != nil {
			return BeginResult{}, true, err
		}
		if err := t.PutHead(sessionID, h); err != nil {
			return BeginResult{}, true, err
		}
	}
	a := *c.Approval
	return BeginResult{Decision: dec, Approval: &a}, true, nil
}

// Register enters the call req names in the session's ledger, when the
// ledger does not know it, as a begin-tracked call pending in the latest
// revision without making a revision, and begins it, in one write; a call
// the ledger knows (by a save or an earlier Register) is begun as Begin
// does, whatever revision it was pending in. A call with a recorded effect
// is answered with it, writing nothing. Checks run in the documented order:
// request id, epoch, status.
func Register(t Txn, req *RegisterRequest, now time.Time) (BeginResult, error) {
	sid, u := req.SessionID, req.ToolUse
	h, err := MustHead(t, sid)
	if err != nil {
		return BeginResult{}, err
	}
	var fp []byte
	if req.RequestID != "" {
		fp = req.Fingerprint()
		r, err := t.Request(sid, req.RequestID)
		if err != nil {
			return BeginResult{}, err
		}
		if r != nil {
			if string(r.Fingerprint) != string(fp) {
				return BeginResult{}, fmt.Errorf("%w: request id %s was already used for a different request of session %q; make a new id for a new request",
					ErrRequestIDReused, req.RequestID, sid)
			}
			c, err := t.LedgerEntry(sid, u.ID)
			if err != nil {
				return BeginResult{}, err
			}
			if c != nil && c.DuplicateOf != "" {
				d, err := caughtDuplicate(t, sid, h, c)
				if err != nil {
					return BeginResult{}, err
				}
				return d.result(false, nil)
			}
			if c == nil || !c.Begun {
				return BeginResult{}, Corrupt(h, sid, fmt.Errorf("request %s began tool use %q, which the ledger does not hold begun", req.RequestID, u.ID))
			}
			return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: r.AlreadyBegun, Decision: DecisionRun, Approval: c.Approval}, nil
		}
	}
	if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
		return BeginResult{}, err
	}
	if err := Active(h, sid); err != nil {
		return BeginResult{}, err
	}
	c, err := t.LedgerEntry(sid, u.ID)
	if err != nil {
		return BeginResult{}, err
	}
	switch {
	case c == nil:
		c = &LedgerEntry{ToolUseID: u.ID, Name: u.Name, Class: u.Class, BeginTracked: true, LastPendingRevision: h.Revision, Registered: true,
			InputDigest: InputDigest(u.Name, u.InputJSON), Repeatable: u.Repeatable}
	case c.Name != u.Name:
		return BeginResult{}, fmt.Errorf("%w: tool use %q is a call of %q, not %q", ErrToolNameMismatch, u.ID, c.Name, u.Name)
	case c.Effect != nil:
		e := *c.Effect
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: c.Begun, Effect: &e, Decision: DecisionReuse, Approval: c.Approval}, nil
	}
	if c.DuplicateOf != "" {
		d, err := caughtDuplicate(t, sid, h, c)
		if err != nil {
			return BeginResult{}, err
		}
		return d.result(req.RequestID != "", func() error {
			return t.PutRequest(sid, &RequestRecord{RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch})
		})
	}
	if c.Repeatable = c.Repeatable || u.Repeatable; !c.Begun {
		d, err := catchDuplicate(t, sid, h, c)
		if err != nil {
			return BeginResult{}, err
		}
		if d != nil {
			return d.result(req.RequestID != "", func() error {
				return t.PutRequest(sid, &RequestRecord{RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch})
			})
		}
	}
	if !c.Begun && (req.RequiresApproval || c.Approval != nil) {
		// A call that requires approval, as in Begin, for the input it is
		// begun with now.
		if res, gated, err := gate(t, h, sid, c, u.Name, u.InputJSON, now); err != nil || gated {
			return res, err
		}
	}
	res := BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: c.Begun, Decision: DecisionRun}
	// The new attempt a NOT_DONE resolution allowed, as in Begin.
	retry := c.Resolution != nil && c.Resolution.Outcome == ResolvedNotDone && !c.Resolution.RetryBegun
	if retry {
		c.Resolution.RetryBegun, c.BeginTime = true, now
	}
	if !c.Begun {
		if res.IdempotencyKey, err = newIdempotencyKey(); err != nil {
			return BeginResult{}, err
		}
		c.Begun, c.IdempotencyKey, c.BeginTime = true, res.IdempotencyKey, now
		c.stampRun(h)
	}
	res.Approval = c.Approval
	if retry || !res.AlreadyBegun {
		if err := t.PutLedgerEntry(sid, c); err != nil {
			return BeginResult{}, err
		}
	}
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{
			RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch, AlreadyBegun: res.AlreadyBegun,
		}); err != nil {
			return BeginResult{}, err
		}
	}
	return res, nil
}

// Record adds e to the ledger unless an effect is recorded for its call
// already (the first record stands); it returns the stored effect and
// whether it was there. A refused effect is an error that never ran. Recording is not fenced: a tool that ran must be
// recordable by the process that ran it, even after a takeover.
//
// With e.RequestID, a retry with the same request id and payload is
// answered as the first call was (already as it was then), from the
// request's record written with the effect in one write; the id with
// another payload is ErrRequestIDReused.
func Record(t Txn, sessionID string, e Effect, now time.Time) (stored Effect, already bool, err error) {
	h, err := MustHead(t, sessionID)
	if err != nil {
		return Effect{}, false, err
	}
	rid := e.RequestID
	e.RequestID = ""
	if rid == "" {
		return record(t, h, sessionID, e, now)
	}
	fp := e.Fingerprint(sessionID)
	r, err := t.Request(sessionID, rid)
	if err != nil {
		return Effect{}, false, err
	}
	if r != nil {
		if string(r.Fingerprint) != string(fp) {
			return Effect{}, false, fmt.Errorf("%w: request id %s was already used for a different request of session %q; make a new id for a new request",
				ErrRequestIDReused, rid, sessionID)
		}
		c, err := t.LedgerEntry(sessionID, e.ToolUseID)
		if err != nil {
			return Effect{}, false, err
		}
		if c == nil || c.Effect == nil {
			return Effect{}, false, Corrupt(h, sessionID, fmt.Errorf("request %s recorded tool use %q, which the ledger does not hold recorded", rid, e.ToolUseID))
		}
		return *c.Effect, r.AlreadyBegun, nil
	}
	stored, already, err = record(t, h, sessionID, e, now)
	if err != nil {
		return Effect{}, false, err
	}
	// AlreadyBegun holds a record's already_recorded.
	return stored, already, t.PutRequest(sessionID, &RequestRecord{RequestID: rid, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch, AlreadyBegun: already})
}

func record(t Txn, h *HeadRecord, sessionID string, e Effect, now time.Time) (stored Effect, already bool, err error) {
	c, err := t.LedgerEntry(sessionID, e.ToolUseID)
	if err != nil {
		return Effect{}, false, err
	}
	if c == nil {
		return Effect{}, false, fmt.Errorf("%w: tool use %q was never pending in session %q; save it as pending at Point A before recording its effect",
			ErrCallUnknown, e.ToolUseID, sessionID)
	}
	if e.Name == "" {
		e.Name = c.Name
	}
	if e.Name != c.Name {
		return Effect{}, false, fmt.Errorf("%w: tool use %q is a call of %q, not %q", ErrToolNameMismatch, e.ToolUseID, c.Name, e.Name)
	}
	e.IsError = e.IsError || e.Refused
	if c.Effect != nil {
		if !c.Effect.SameOutcome(e) {
			return Effect{}, false, &StateError{Err: ErrEffectConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a different recorded effect; the first record stands", e.ToolUseID)}
		}
		return *c.Effect, true, nil
	}
	e.RecordTime = now
	e.IsError = e.IsError || e.Refused
	// A registered call is pending until it is recorded, whatever revision
	// it was registered at, so its record is never late.
	e.Late = c.LastPendingRevision != h.Revision && !c.Registered
	c.Effect = &e
	c.stampRun(h)
	if a := c.Approval; a != nil && a.Status == ApprovalWaiting {
		// An outcome recorded without the approval (a refusal the agent
		// gave up with): nothing waits any more.
		c.Approval = nil
		addWaiting(h, -1)
		if err := t.PutHead(sessionID, h); err != nil {
			return Effect{}, false, err
		}
	}
	return e, false, t.PutLedgerEntry(sessionID, c)
}

// newIdempotencyKey returns a fresh idempotency key for a begun call: 16
// random bytes in hex. An error means the system's random source failed.
func newIdempotencyKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
