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
	if err := Fence(sessionID, h.Epoch, h.Revision, h.Resumed, epoch); err != nil {
		return BeginResult{}, err
	}
	if err := Active(h, sessionID); err != nil {
		return BeginResult{}, err
	}
	c, err := t.Call(sessionID, toolUseID)
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
			return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true}, t.PutCall(sessionID, c)
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
	return BeginResult{IdempotencyKey: c.IdempotencyKey}, t.PutCall(sessionID, c)
}

// Record adds e to the ledger unless an effect is recorded for its call
// already (the first record stands); it returns the stored effect and
// whether it was there. Recording is not fenced: a tool that ran must be
// recordable by the process that ran it, even after a takeover.
func Record(t Txn, sessionID string, e Effect, now time.Time) (stored Effect, already bool, err error) {
	h, err := MustHead(t, sessionID)
	if err != nil {
		return Effect{}, false, err
	}
	c, err := t.Call(sessionID, e.ToolUseID)
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
	if c.Effect != nil {
		if !c.Effect.SameOutcome(e) {
			return Effect{}, false, &StateError{Err: ErrEffectConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a different recorded effect; the first record stands", e.ToolUseID)}
		}
		return *c.Effect, true, nil
	}
	e.RecordTime = now
	e.Late = c.LastPendingRevision != h.Revision
	c.Effect = &e
	return e, false, t.PutCall(sessionID, c)
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
