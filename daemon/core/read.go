package core

import (
	"context"
	"errors"
	"iter"
	"maps"
)

// PendingToolUses returns the latest revision of the session whose head is h
// and its pending tool uses, each with its begin marker and recorded effect.
func PendingToolUses(t Txn, sessionID string, h *HeadRecord) (uint64, []PendingToolUse, error) {
	r, err := t.Revision(sessionID, h, 0)
	if err != nil {
		return 0, nil, err
	}
	var calls []PendingToolUse
	for _, u := range r.Pending {
		c, err := t.LedgerEntry(sessionID, u.ID)
		if err != nil {
			return 0, nil, err
		}
		pc := PendingToolUse{ToolUse: u}
		if c != nil {
			pc.Begun, pc.IdempotencyKey, pc.Effect, pc.Resolution, pc.Approval = c.Begun, c.IdempotencyKey, c.Effect, c.Resolution, c.Approval
		}
		calls = append(calls, pc)
	}
	return r.Revision, calls, nil
}

// LedgerToolUses returns the latest revision of the session whose head is h
// and the calls ids name, in their order, each as its ledger entry knows
// it; a call the ledger does not know is returned as a begin-tracked call
// never begun, since the caller promises every call is begun before it
// runs.
func LedgerToolUses(t Txn, sessionID string, h *HeadRecord, ids []string) (uint64, []PendingToolUse, error) {
	calls := make([]PendingToolUse, 0, len(ids))
	for _, id := range ids {
		c, err := t.LedgerEntry(sessionID, id)
		if err != nil {
			return 0, nil, err
		}
		pc := PendingToolUse{ToolUse: ToolUse{ID: id, BeginTracked: true}}
		if c != nil {
			pc.ToolUse = ToolUse{ID: id, Name: c.Name, Class: c.Class, BeginTracked: c.BeginTracked}
			pc.Begun, pc.IdempotencyKey, pc.Effect, pc.Approval = c.Begun, c.IdempotencyKey, c.Effect, c.Approval
		}
		calls = append(calls, pc)
	}
	return h.Revision, calls, nil
}

// InDoubt is how many of the session's pending calls Reconcile decides
// DecisionInDoubt. Damaged pending calls count as all in doubt, so that
// ListSessions still lists the session for an operator to find.
func InDoubt(t Txn, sessionID string, h *HeadRecord) (uint32, error) {
	if h.PendingCount == 0 {
		return 0, nil
	}
	_, calls, err := PendingToolUses(t, sessionID, h)
	if errors.Is(err, ErrCheckpointCorrupt) {
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
// inDoubt of its pending tool uses in doubt.
func SummaryOf(sessionID string, h *HeadRecord, inDoubt uint32) SessionSummary {
	return SessionSummary{
		SessionID: sessionID, Revision: h.Revision, Epoch: h.Epoch, Task: h.Task, Turn: h.Turn,
		MessageCount: h.MessageCount, PendingToolUseCount: h.PendingCount, InDoubtToolUseCount: inDoubt,
		Labels: maps.Clone(h.Labels), CreateTime: h.CreateTime, UpdateTime: h.UpdateTime, Status: h.Status,
		ResolvedByVerify: h.ResolvedByVerify, ResolvedByPerson: h.ResolvedByPerson, AwaitingApproval: h.AwaitingApproval,
	}
}

// SeqRanges yields, in order, the ranges [first, end) of sequence numbers
// holding the messages of a history stored in segs, from message index
// start on.
func SeqRanges(segs []Segment, start uint64) iter.Seq2[uint64, uint64] {
	return func(yield func(uint64, uint64) bool) {
		idx := uint64(0)
		for _, sg := range segs {
			if start < idx+sg.Count && !yield(sg.FirstSeq+(max(start, idx)-idx), sg.FirstSeq+sg.Count) {
				return
			}
			idx += sg.Count
		}
	}
}

// MessagePage is the answer of one Store.Messages call being filled: at
// least one message, then as many as fit MaxBytes (by MessageSize) and
// MaxCount (0: no count limit).
type MessagePage struct {
	MaxBytes, MaxCount int
	Messages           []Message
	size               int
}

// Add appends m and returns true, or returns false, appending nothing, when
// the page is full.
func (p *MessagePage) Add(m Message) bool {
	p.size += MessageSize(m)
	if len(p.Messages) > 0 && (p.size > p.MaxBytes || (p.MaxCount > 0 && len(p.Messages) >= p.MaxCount)) {
		return false
	}
	p.Messages = append(p.Messages, m)
	return true
}

// Recovered is what a store holds when it opens: how many live sessions, how
// many of them have a pending tool use that Reconcile decides in doubt, and
// the last commit's sequence number (StoreInfo.LastCommit).
type Recovered struct {
	Sessions, SessionsInDoubt int
	LastCommit                uint64
}

// Recover counts what s holds, reading every live session's head a page at
// a time; it changes nothing.
func Recover(ctx context.Context, s Store) (Recovered, error) {
	r := Recovered{LastCommit: s.Info().LastCommit}
	after := ""
	for {
		page, err := s.ListSessions(ctx, after, 1000, SessionFilter{})
		if err != nil {
			return Recovered{}, err
		}
		for _, ss := range page {
			r.Sessions++
			if ss.InDoubtToolUseCount > 0 {
				r.SessionsInDoubt++
			}
		}
		if len(page) < 1000 {
			return r, nil
		}
		after = page[len(page)-1].SessionID
	}
}
