package core

import (
	"fmt"
	"strings"
)

// Fence returns nil when epoch may write to session sessionID, whose owner
// is epoch owner at revision (resumed: Resume has run on it at least once),
// and otherwise a *StateError wrapping ErrSessionFenced: an epoch older or
// newer than the owner's, or 0 once the session has been resumed. Every
// store applies it, so that they cannot disagree on fencing.
func Fence(sessionID string, owner, revision uint64, resumed bool, epoch uint64) error {
	if epoch == owner || (epoch == 0 && !resumed) {
		return nil
	}
	msg := fmt.Sprintf("session %q is owned by epoch %d, not %d: another process has taken it over (by Resume, or by deleting and re-creating it); stop writing to it",
		sessionID, owner, epoch)
	if epoch == 0 {
		msg = fmt.Sprintf("session %q has been resumed (epoch %d); epoch 0 is accepted only before the first Resume",
			sessionID, owner)
	}
	return &StateError{Err: ErrSessionFenced, Msg: msg, CurrentRevision: revision, CurrentEpoch: owner}
}

// InDoubtCount returns how many of calls Reconcile decides DecisionInDoubt,
// the figure SessionSummary.InDoubtToolUseCount reports.
func InDoubtCount(calls []PendingToolUse) uint32 {
	var n uint32
	for _, r := range Reconcile(calls) {
		if r.Decision == DecisionInDoubt {
			n++
		}
	}
	return n
}

// HasLabels reports whether labels hold every pair of filter, the label
// rule of ListSessions; an empty filter matches every session.
func HasLabels(labels, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Replay returns the remembered answer of a request id used before for the
// same request (fingerprint fp), nil when the id is new or empty, and an
// error wrapping ErrRequestIDReused when it was used for another request.
func Replay(t Txn, h *HeadRecord, sessionID, requestID string, fp []byte) (*RequestRecord, error) {
	if requestID == "" {
		return nil, nil
	}
	r, err := t.Request(sessionID, requestID)
	if err != nil || r == nil {
		return nil, err
	}
	if string(r.Fingerprint) != string(fp) {
		return nil, fmt.Errorf("%w: request id %s was already used for a different request to session %q; make a new id for a new request",
			ErrRequestIDReused, requestID, sessionID)
	}
	return r, nil
}

// MustHead returns the session's live head, or an error wrapping
// ErrSessionNotFound when it has none.
func MustHead(t Txn, sessionID string) (*HeadRecord, error) {
	h, err := t.Head(sessionID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, NotFound(sessionID)
	}
	return h, nil
}

// NotFound is the error for a session that has no live head.
func NotFound(sessionID string) error {
	return fmt.Errorf("%w: session %q: nothing to resume from; create it with SaveCheckpoint and expected_revision 0",
		ErrSessionNotFound, sessionID)
}

// Active returns nil for an active session and an error wrapping
// ErrSessionCompleted for a completed or failed one.
func Active(h *HeadRecord, sessionID string) error {
	if h.Status == StatusActive {
		return nil
	}
	return &StateError{Err: ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
		Msg: fmt.Sprintf("session %q is %s; resume it with reopen to continue it", sessionID, strings.ToLower(h.Status.String()))}
}

// Corrupt is the error for a session whose stored data cannot be decoded;
// h, when known, gives the revision and epoch the caller is told.
func Corrupt(h *HeadRecord, sessionID string, err error) error {
	msg := fmt.Sprintf("session %q: stored data cannot be decoded (%v) and can no longer be trusted; "+
		"read what you can with GetSession and delete it with DeleteSession", sessionID, err)
	if h == nil {
		return fmt.Errorf("%w: %s", ErrCheckpointCorrupt, msg)
	}
	return &StateError{Err: ErrCheckpointCorrupt, Msg: msg, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch}
}
