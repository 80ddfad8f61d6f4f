package core

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// ForkSource is what a fork copies, read by the store from one snapshot of
// the source session: the revision forked, its history, the ledger entries
// of the calls pending in it or in a kept revision before it, and what the
// source did after it.
type ForkSource struct {
	Revision *RevisionRecord
	// Messages is the revision's history, in order. ForkWrite stages it
	// unless it is nil: a store that copies a long history in batches of its
	// own leaves it nil.
	Messages []Message
	// Ledger is the ledger entries of the history's tool uses.
	Ledger []LedgerEntry
	// PerformedAfter and InDoubtAfter are AfterRevision of Revision.
	PerformedAfter, InDoubtAfter []LedgerEntry
}

// ForkTarget checks a fork's new id, req.NewID: a retry of the same fork
// returns the fork's remembered result as prev; an id with a live session
// is an error wrapping ErrSessionExists; otherwise it returns the epoch the
// new session starts at, one above the id's last deletion, so that a writer
// of a deleted session at that id stays fenced.
func ForkTarget(t Txn, req *ForkRequest) (epoch uint64, prev *RequestRecord, err error) {
	nid := req.NewID
	h, err := t.Head(nid)
	if err != nil {
		return 0, nil, err
	}
	if h != nil {
		prev, err := Replay(t, h, nid, req.RequestID, req.Fingerprint())
		if err != nil || prev != nil {
			return 0, prev, err
		}
		return 0, nil, &StateError{Err: ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q exists at revision %d; fork into a new id, or delete it first", nid, h.Revision)}
	}
	deleted, err := t.DeletedEpoch(nid)
	if err != nil {
		return 0, nil, err
	}
	return deleted + 1, nil, nil
}

// ForkWrite stages the new session of a fork at epoch, which ForkTarget
// returned in the same transaction: its first revision, a copy of the
// source's with the history in one segment from sequence 0; the history
// itself unless src.Messages is nil; the source's ledger entries, those
// pending in the forked revision pending at revision 1 and the others before
// it, so that Reconcile reuses a recorded effect and never runs it again;
// the request id; and the head.
func ForkWrite(t Txn, req *ForkRequest, src *ForkSource, epoch uint64, now time.Time) (BranchResult, error) {
	nid := req.NewID
	n := src.Revision.MessageCount
	rec := *src.Revision
	rec.Revision, rec.Epoch, rec.SaveTime = 1, epoch, now
	rec.Segments = nil
	if n > 0 {
		rec.Segments = []Segment{{FirstSeq: 0, Count: n}}
	}
	h := &HeadRecord{
		Epoch: epoch, Revision: 1, NextSeq: n, CreateTime: now, UpdateTime: now,
		Task: rec.Task, Turn: rec.Turn, MessageCount: n, PendingCount: uint32(len(rec.Pending)),
		Labels: maps.Clone(rec.Labels), Segments: slices.Clone(rec.Segments), Status: StatusActive,
	}
	if err := t.Create(nid, h); err != nil {
		return BranchResult{}, err
	}
	if src.Messages != nil {
		if err := t.PutMessages(nid, 0, src.Messages); err != nil {
			return BranchResult{}, err
		}
	}
	pending := map[string]bool{}
	for _, u := range rec.Pending {
		pending[u.ID] = true
	}
	for _, c := range src.Ledger {
		c.LastPendingRevision = 0 // pending before the fork's first revision
		// The source's runs are not the fork's: the guard compares the
		// fork's own epochs only.
		c.RunEpoch, c.RunRevision = 0, 0
		if pending[c.ToolUseID] {
			c.LastPendingRevision = 1
		}
		if a := c.Approval; a != nil && (a.Status == ApprovalWaiting || a.Status == ApprovalApproved && !a.Spent) {
			// An approval is for the session it was given in: the fork's
			// copy of the call asks again, so that it is never spent twice.
			setApproval(&c.Approval, &c.EarlierApprovals, nil)
		}
		if err := t.PutLedgerEntry(nid, &c); err != nil {
			return BranchResult{}, err
		}
	}
	if err := t.PutRevision(nid, &rec); err != nil {
		return BranchResult{}, err
	}
	if req.RequestID != "" {
		if err := t.PutRequest(nid, &RequestRecord{
			RequestID: req.RequestID, Fingerprint: req.Fingerprint(), Revision: 1, MessageCount: n, Epoch: epoch,
		}); err != nil {
			return BranchResult{}, err
		}
	}
	if err := t.PutHead(nid, h); err != nil {
		return BranchResult{}, err
	}
	return BranchResult{Revision: 1, Epoch: epoch, MessageCount: n,
		PerformedAfter: src.PerformedAfter, InDoubtAfter: src.InDoubtAfter}, nil
}

// ForkRetried is the result of a fork that prev says was already done.
func ForkRetried(src *ForkSource, prev *RequestRecord) BranchResult {
	return BranchResult{Revision: prev.Revision, Epoch: prev.Epoch, MessageCount: prev.MessageCount,
		PerformedAfter: src.PerformedAfter, InDoubtAfter: src.InDoubtAfter}
}
