package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Begin marks a call pending in the latest revision as dispatched, giving it
// a new idempotency key the first time.
func Begin(t Txn, sessionID, toolUseID string, epoch uint64, now time.Time) (BeginResult, error) {
	h, err := MustHead(t, sessionID)
	if err != nil {
		return BeginResult{}, err
	}
	return begin(t, h, sessionID, toolUseID, epoch, now)
}

func begin(t Txn, h *HeadRecord, sessionID, toolUseID string, epoch uint64, now time.Time) (BeginResult, error) {
	if err := Fence(sessionID, h.Epoch, h.Revision, h.Resumed, epoch); err != nil {
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
	if r := c.Resolution; r != nil && r.Outcome == ResolvedNotDone && !r.RetryBegun {
		// The new attempt a NOT_DONE resolution allowed: from now on its
		// outcome is unknown again until recorded.
		r.RetryBegun = true
		if c.Begun {
			c.BeginTime = now
			return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true}, t.PutLedgerEntry(sessionID, c)
		}
	}
	if c.Begun {
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true}, nil
	}
	key, err := newIdempotencyKey()
	if err != nil {
		return BeginResult{}, err
	}
	c.Begun = true
	c.IdempotencyKey = key
	c.BeginTime = now
	return BeginResult{IdempotencyKey: c.IdempotencyKey}, t.PutLedgerEntry(sessionID, c)
}

// Register enters the call req names in the session's ledger, when the
// ledger does not know it, as a begin-tracked call pending in the latest
// revision without making a revision, and begins it, in one write; a call
// the ledger knows (by a save or an earlier Register) is begun as Begin
// does, whatever revision it was pending in. A call with a recorded effect
// is answered with it, writing nothing. Checks run in the documented order:
// request id, epoch, status. With req.BeginOnly it is Begin, with the
// request id's record written with the begin in one write, so that a retry
// of a begin whose commit's answer was lost gets the first answer
// (already_begun false), not already_begun.
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
			if c == nil || !c.Begun {
				return BeginResult{}, Corrupt(h, sid, fmt.Errorf("request %s began tool use %q, which the ledger does not hold begun", req.RequestID, u.ID))
			}
			return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: r.AlreadyBegun}, nil
		}
	}
	if req.BeginOnly {
		res, err := begin(t, h, sid, u.ID, req.Epoch, now)
		if err != nil || req.RequestID == "" {
			return res, err
		}
		return res, t.PutRequest(sid, &RequestRecord{
			RequestID: req.RequestID, Fingerprint: fp, Revision: h.Revision, Epoch: h.Epoch, AlreadyBegun: res.AlreadyBegun,
		})
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
		c = &LedgerEntry{ToolUseID: u.ID, Name: u.Name, Class: u.Class, BeginTracked: true, LastPendingRevision: h.Revision, Registered: true}
	case c.Name != u.Name:
		return BeginResult{}, fmt.Errorf("%w: tool use %q is a call of %q, not %q", ErrToolNameMismatch, u.ID, c.Name, u.Name)
	case c.Effect != nil:
		e := *c.Effect
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: c.Begun, Effect: &e}, nil
	}
	res := BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: c.Begun}
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
	}
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
