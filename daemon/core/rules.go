package core

import "fmt"

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
func InDoubtCount(calls []PendingCall) uint32 {
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
