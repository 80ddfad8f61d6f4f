package core

import (
	"fmt"
	"time"
)

// Save makes the revision req asks for, in the documented order of checks:
// request id, epoch, status, revision.
func Save(t Txn, req *SaveRequest, now time.Time) (SaveResult, error) {
	sid := req.SessionID
	var fp []byte // the payload's digest, only for a save with a request id
	if req.RequestID != "" {
		fp = req.Fingerprint()
	}
	h, prev, err := saveTarget(t, req, fp, now)
	if err != nil || prev != nil {
		return prev.result(), err
	}
	segments, newCount, err := appendHistory(t, req, h)
	if err != nil {
		return SaveResult{}, err
	}
	rev := h.Revision + 1
	if err := markPending(t, req, h, rev); err != nil {
		return SaveResult{}, err
	}
	if err := t.PutRevision(sid, &RevisionRecord{
		Revision:     rev,
		Epoch:        h.Epoch,
		Task:         req.Task,
		Turn:         req.Turn,
		TokensUsed:   req.TokensUsed,
		Segments:     segments,
		MessageCount: newCount,
		Pending:      req.PendingToolUses,
		StateJSON:    req.StateJSON,
		Labels:       req.Labels,
		SaveTime:     now,
	}); err != nil {
		return SaveResult{}, err
	}

	res := SaveResult{Revision: rev, MessageCount: newCount, Epoch: h.Epoch}
	h.Revision = rev
	h.UpdateTime = now
	h.Task, h.Turn, h.MessageCount = req.Task, req.Turn, newCount
	h.PendingCount = uint32(len(req.PendingToolUses))
	h.Labels = req.Labels
	h.Segments = segments
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{
			RequestID: req.RequestID, Fingerprint: fp, Revision: res.Revision, MessageCount: res.MessageCount, Epoch: res.Epoch,
		}); err != nil {
			return SaveResult{}, err
		}
	}
	return res, t.PutHead(sid, h)
}

// result is the answer a retry of the remembered request gets; a nil
// record's is the zero result.
func (r *RequestRecord) result() SaveResult {
	if r == nil {
		return SaveResult{}
	}
	return SaveResult{Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch}
}

// saveTarget runs a save's checks on the session's head and returns the head
// the save builds on (a new one, claimed with Create, for a create), or the
// remembered request of a retry: (1) request id, every save's remembered
// for the life of the session; (2) epoch, then (3) revision. The head holds
// what the save needs of the previous revision (its message count and
// segments), so no revision is read.
func saveTarget(t Txn, req *SaveRequest, fp []byte, now time.Time) (*HeadRecord, *RequestRecord, error) {
	sid := req.SessionID
	h, err := t.Head(sid)
	if err != nil {
		return nil, nil, err
	}
	if h != nil && req.RequestID != "" {
		r, err := t.Request(sid, req.RequestID)
		if err != nil {
			return nil, nil, err
		}
		if r != nil {
			if string(r.Fingerprint) != string(fp) {
				return nil, nil, fmt.Errorf("%w: request id %s was already used for a different save of session %q; make a new id for a new save",
					ErrRequestIDReused, req.RequestID, sid)
			}
			return nil, r, nil
		}
	}
	switch {
	case h != nil:
		if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
			return nil, nil, err
		}
		if err := Active(h, sid); err != nil {
			return nil, nil, err
		}
		if req.ExpectedRevision == 0 {
			return nil, nil, &StateError{Err: ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; resume it, or delete it to start over", sid, h.Revision)}
		}
		if req.ExpectedRevision != h.Revision {
			return nil, nil, &StateError{Err: ErrRevisionMismatch, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is at revision %d, not %d; reload it before saving", sid, h.Revision, req.ExpectedRevision)}
		}
		return h, nil, nil
	case req.ExpectedRevision != 0:
		return nil, nil, fmt.Errorf("%w: session %q does not exist; create it with expected_revision 0",
			ErrSessionNotFound, sid)
	}
	// A create, over a tombstone or above the epoch floor.
	deleted, err := t.DeletedEpoch(sid)
	if err != nil {
		return nil, nil, err
	}
	if req.Epoch != 0 && req.Epoch <= deleted {
		return nil, nil, &StateError{Err: ErrSessionFenced, CurrentEpoch: deleted,
			Msg: fmt.Sprintf("session %q was deleted at epoch %d or earlier; epoch %d is stale", sid, deleted, req.Epoch)}
	}
	h = &HeadRecord{Epoch: deleted + 1, CreateTime: now, Status: StatusActive}
	if err := t.Create(sid, h); err != nil {
		return nil, nil, err
	}
	return h, nil, nil
}

// appendHistory keeps the prefix of the head's history that the save
// keeps, stages the messages it appends, and returns the new revision's
// segments and message count; it advances h.NextSeq.
func appendHistory(t Txn, req *SaveRequest, h *HeadRecord) ([]Segment, uint64, error) {
	sid := req.SessionID
	count := h.MessageCount
	if n := segmentsCount(h.Segments); n != count {
		return nil, 0, Corrupt(h, sid, fmt.Errorf("the head lists %d messages in its segments but counts %d", n, count))
	}
	keep := count
	if req.KeepMessages != nil {
		keep = *req.KeepMessages
		if keep > count {
			return nil, 0, &StateError{Err: ErrKeepMessagesOutOfRange, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("keep_messages %d is beyond the %d stored messages of session %q", keep, count, sid)}
		}
	}
	segments := truncateSegments(h.Segments, keep)
	if n := uint64(len(req.AppendMessages)); n > 0 {
		first := h.NextSeq
		if err := t.PutMessages(sid, first, req.AppendMessages); err != nil {
			return nil, 0, err
		}
		h.NextSeq += n
		if last := len(segments) - 1; last >= 0 && segments[last].FirstSeq+segments[last].Count == first {
			segments[last].Count += n
		} else {
			segments = append(segments, Segment{FirstSeq: first, Count: n})
		}
	}
	return segments, keep + uint64(len(req.AppendMessages)), nil
}

// markPending remembers each of the save's pending tool uses as pending at
// revision rev, refusing one whose effect is already recorded. The revision
// keeps the whole tool use; the ledger entry needs only what RecordEffect
// checks, so a large input is not stored twice.
func markPending(t Txn, req *SaveRequest, h *HeadRecord, rev uint64) error {
	for _, u := range req.PendingToolUses {
		c, err := t.LedgerEntry(req.SessionID, u.ID)
		if err != nil {
			return err
		}
		if c == nil {
			c = &LedgerEntry{ToolUseID: u.ID}
		}
		if c.Effect != nil {
			return &StateError{Err: ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; append its result instead of making it pending again", u.ID)}
		}
		c.Name, c.Class, c.BeginTracked = u.Name, u.Class, u.BeginTracked
		c.InputDigest, c.Repeatable = InputDigest(u.Name, u.InputJSON), u.Repeatable
		if c.PendingSince == 0 {
			c.PendingSince = rev
		}
		c.LastPendingRevision = rev
		if err := t.PutLedgerEntry(req.SessionID, c); err != nil {
			return err
		}
	}
	return nil
}

func segmentsCount(segs []Segment) uint64 {
	var n uint64
	for _, sg := range segs {
		n += sg.Count
	}
	return n
}

// truncateSegments returns the segments covering the first keep messages, as
// a new slice: the previous revision's segments are never changed.
func truncateSegments(segs []Segment, keep uint64) []Segment {
	out := make([]Segment, 0, len(segs)+1)
	for _, sg := range segs {
		if keep == 0 {
			break
		}
		n := min(sg.Count, keep)
		out = append(out, Segment{FirstSeq: sg.FirstSeq, Count: n})
		keep -= n
	}
	return out
}
