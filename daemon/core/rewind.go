package core

import (
	"maps"
	"slices"
	"time"
)

// Rewind makes a new latest revision equal to req.Revision, fenced like a
// save. Its pending tool uses become pending again with their ledger entries
// kept, so a call recorded since is reused by Reconcile instead of refused.
func Rewind(t Txn, req *RewindRequest, now time.Time) (BranchResult, error) {
	sid := req.SessionID
	h, err := MustHead(t, sid)
	if err != nil {
		return BranchResult{}, err
	}
	fp := req.Fingerprint()
	prev, err := Replay(t, h, sid, req.RequestID, fp)
	if err != nil {
		return BranchResult{}, err
	}
	if prev == nil {
		if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
			return BranchResult{}, err
		}
		if err := Active(h, sid); err != nil {
			return BranchResult{}, err
		}
	}
	old, err := t.Revision(sid, h, req.Revision)
	if err != nil {
		return BranchResult{}, err
	}
	var res BranchResult
	if res.PerformedAfter, res.InDoubtAfter, err = AfterRevision(t, sid, old); err != nil {
		return BranchResult{}, err
	}
	if prev != nil {
		res.Revision, res.Epoch, res.MessageCount = prev.Revision, prev.Epoch, prev.MessageCount
		return res, nil
	}
	rev := h.Revision + 1
	rec := *old
	rec.Revision, rec.Epoch, rec.SaveTime = rev, h.Epoch, now
	for _, u := range rec.Pending {
		c, err := t.LedgerEntry(sid, u.ID)
		if err != nil {
			return BranchResult{}, err
		}
		if c == nil {
			c = &LedgerEntry{ToolUseID: u.ID, Name: u.Name, Class: u.Class, BeginTracked: u.BeginTracked,
				InputDigest: InputDigest(u.Name, u.InputJSON), Repeatable: u.Repeatable}
		}
		if c.PendingSince == 0 {
			c.PendingSince = rev
		}
		c.LastPendingRevision = rev // pending again: BeginEffect works, a recorded effect is reused
		if err := t.PutLedgerEntry(sid, c); err != nil {
			return BranchResult{}, err
		}
	}
	if err := t.PutRevision(sid, &rec); err != nil {
		return BranchResult{}, err
	}
	h.Revision, h.UpdateTime = rev, now
	h.Task, h.Turn, h.MessageCount = rec.Task, rec.Turn, rec.MessageCount
	h.PendingCount = uint32(len(rec.Pending))
	h.Labels, h.Segments = maps.Clone(rec.Labels), slices.Clone(rec.Segments)
	res.Revision, res.Epoch, res.MessageCount = rev, h.Epoch, rec.MessageCount
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{
			RequestID: req.RequestID, Fingerprint: fp, Revision: rev, MessageCount: rec.MessageCount, Epoch: h.Epoch,
		}); err != nil {
			return BranchResult{}, err
		}
	}
	return res, t.PutHead(sid, h)
}

// AfterRevision lists the session's calls that are not read-only whose
// effect was recorded, or which were begun without an effect, after r was
// saved, in tool use id order: what a fork or rewind to r leaves behind.
func AfterRevision(t Txn, sessionID string, r *RevisionRecord) (performed, inDoubt []LedgerEntry, err error) {
	since := r.SaveTime
	err = t.EachLedgerEntry(sessionID, func(c *LedgerEntry) (bool, error) {
		if c.Class == ReadOnly {
			return true, nil
		}
		switch {
		case c.Effect != nil && c.Effect.RecordTime.After(since):
			performed = append(performed, *c)
		case c.Effect == nil && c.Begun && c.BeginTime.After(since):
			inDoubt = append(inDoubt, *c)
		}
		return true, nil
	})
	return performed, inDoubt, err
}

// CheckpointOf is revision r of the session whose head is h: its epoch and
// status are the session's now, not the revision's, and its create time the
// session's.
func CheckpointOf(sessionID string, h *HeadRecord, r *RevisionRecord) Checkpoint {
	return Checkpoint{
		SessionID: sessionID, Revision: r.Revision, Epoch: h.Epoch, Task: r.Task, Turn: r.Turn,
		TokensUsed: r.TokensUsed, MessageCount: r.MessageCount, PendingToolUses: r.Pending,
		StateJSON: r.StateJSON, Labels: maps.Clone(r.Labels), SaveTime: r.SaveTime,
		Status: h.Status, FinalOutput: h.FinalOutput, CompleteTime: h.CompleteTime, CreateTime: h.CreateTime,
	}
}
