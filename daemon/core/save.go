package core

import (
	"fmt"
	"time"
)

// Save makes the revision req asks for.
func Save(t Txn, req *SaveRequest, now time.Time) (SaveResult, error) {
	sid := req.SessionID
	h, err := t.Head(sid)
	if err != nil {
		return SaveResult{}, err
	}
	var fp []byte // the payload's digest, only for a save with a request id
	if req.RequestID != "" {
		fp = req.Fingerprint()
	}

	// (1) request id: a retry returns the original response. Every save's id
	// is remembered for the life of the session.
	if h != nil && req.RequestID != "" {
		r, err := t.Request(sid, req.RequestID)
		if err != nil {
			return SaveResult{}, err
		}
		if r != nil {
			if string(r.Fingerprint) != string(fp) {
				return SaveResult{}, fmt.Errorf("%w: request id %s was already used for a different save of session %q; make a new id for a new save",
					ErrRequestIDReused, req.RequestID, sid)
			}
			return SaveResult{Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch}, nil
		}
	}

	// (2) epoch, then (3) revision. The head holds what the save needs of
	// the previous revision (its message count and segments), so no
	// revision is read.
	switch {
	case h != nil:
		if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
			return SaveResult{}, err
		}
		if err := Active(h, sid); err != nil {
			return SaveResult{}, err
		}
		if req.ExpectedRevision == 0 {
			return SaveResult{}, &StateError{Err: ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; resume it, or delete it to start over", sid, h.Revision)}
		}
		if req.ExpectedRevision != h.Revision {
			return SaveResult{}, &StateError{Err: ErrRevisionMismatch, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is at revision %d, not %d; reload it before saving", sid, h.Revision, req.ExpectedRevision)}
		}
	case req.ExpectedRevision != 0:
		return SaveResult{}, fmt.Errorf("%w: session %q does not exist; create it with expected_revision 0",
			ErrNotFound, sid)
	default: // create, over a tombstone or above the epoch floor
		deleted, err := t.DeletedEpoch(sid)
		if err != nil {
			return SaveResult{}, err
		}
		if req.Epoch != 0 && req.Epoch <= deleted {
			return SaveResult{}, &StateError{Err: ErrFenced, CurrentEpoch: deleted,
				Msg: fmt.Sprintf("session %q was deleted at epoch %d or earlier; epoch %d is stale", sid, deleted, req.Epoch)}
		}
		h = &HeadRecord{Epoch: deleted + 1, CreateTime: now, Status: StatusActive}
		if err := t.Create(sid, h); err != nil {
			return SaveResult{}, err
		}
	}

	// History: keep a prefix of the previous revision's segments, then append.
	count := h.MessageCount
	if n := segmentsCount(h.Segments); n != count {
		return SaveResult{}, Corrupt(h, sid, fmt.Errorf("the head lists %d messages in its segments but counts %d", n, count))
	}
	keep := count
	if req.KeepMessages != nil {
		keep = *req.KeepMessages
		if keep > count {
			return SaveResult{}, &StateError{Err: ErrKeepOutOfRange, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("keep_messages %d is beyond the %d stored messages of session %q", keep, count, sid)}
		}
	}
	segments := truncateSegments(h.Segments, keep)
	if n := uint64(len(req.AppendMessages)); n > 0 {
		first := h.NextSeq
		if err := t.PutMessages(sid, first, req.AppendMessages); err != nil {
			return SaveResult{}, err
		}
		h.NextSeq += n
		if last := len(segments) - 1; last >= 0 && segments[last].FirstSeq+segments[last].Count == first {
			segments[last].Count += n
		} else {
			segments = append(segments, Segment{FirstSeq: first, Count: n})
		}
	}
	newCount := keep + uint64(len(req.AppendMessages))
	rev := h.Revision + 1

	// Pending tool uses: refuse one already recorded; remember each call.
	// The revision keeps the whole tool use; the call record needs only
	// what RecordEffect checks, so a large input is not stored twice.
	for _, u := range req.PendingToolUses {
		c, err := t.Call(sid, u.ID)
		if err != nil {
			return SaveResult{}, err
		}
		if c == nil {
			c = &LedgerEntry{ToolUseID: u.ID}
		}
		if c.Effect != nil {
			return SaveResult{}, &StateError{Err: ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; append its result instead of making it pending again", u.ID)}
		}
		c.Name, c.Class, c.BeginTracked = u.Name, u.Class, u.BeginTracked
		c.LastPendingRevision = rev
		if err := t.PutCall(sid, c); err != nil {
			return SaveResult{}, err
		}
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
