package core

import (
	"errors"
	"maps"
)

// PendingCalls returns the latest revision of the session whose head is h
// and its pending calls, each with its begin marker and recorded effect.
func PendingCalls(t Txn, sessionID string, h *HeadRecord) (uint64, []PendingCall, error) {
	r, err := t.Revision(sessionID, h, 0)
	if err != nil {
		return 0, nil, err
	}
	var calls []PendingCall
	for _, u := range r.Pending {
		c, err := t.Call(sessionID, u.ID)
		if err != nil {
			return 0, nil, err
		}
		pc := PendingCall{ToolUse: u}
		if c != nil {
			pc.Begun, pc.IdempotencyKey, pc.Effect = c.Begun, c.IdempotencyKey, c.Effect
		}
		calls = append(calls, pc)
	}
	return r.Revision, calls, nil
}

// InDoubt is how many of the session's pending calls Reconcile decides
// DecisionInDoubt. Damaged pending calls count as all in doubt, so that
// ListSessions still lists the session for an operator to find.
func InDoubt(t Txn, sessionID string, h *HeadRecord) (uint32, error) {
	if h.PendingCount == 0 {
		return 0, nil
	}
	_, calls, err := PendingCalls(t, sessionID, h)
	if errors.Is(err, ErrCorrupt) {
		return h.PendingCount, nil
	}
	if err != nil {
		return 0, err
	}
	return InDoubtCount(calls), nil
}

// Selects reports whether the live session whose head is h passes the
// filter. Only the head's status, pending count, update time and labels
// are read.
func (f SessionFilter) Selects(h *HeadRecord) bool {
	switch {
	case f.Status != StatusAny && h.Status != f.Status:
		return false
	case f.HasPendingToolUses && h.PendingCount == 0:
		return false
	case !f.UpdatedBefore.IsZero() && !h.UpdateTime.Before(f.UpdatedBefore):
		return false
	}
	return HasLabels(h.Labels, f.Labels)
}

// SummaryOf is the ListSessions entry of the live session whose head is h,
// inDoubt of its pending calls in doubt.
func SummaryOf(sessionID string, h *HeadRecord, inDoubt uint32) SessionSummary {
	return SessionSummary{
		SessionID: sessionID, Revision: h.Revision, Epoch: h.Epoch, Task: h.Task, Turn: h.Turn,
		MessageCount: h.MessageCount, PendingToolUseCount: h.PendingCount, InDoubtToolUseCount: inDoubt,
		Labels: maps.Clone(h.Labels), UpdateTime: h.UpdateTime, Status: h.Status,
	}
}
