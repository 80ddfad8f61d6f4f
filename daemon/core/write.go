package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The protocol's write rules, written once for every store: each function
// reads and stages records through a Txn and returns the operation's result,
// or an error wrapping one of this package's sentinels, in which case the
// store must not commit what was staged. The checks run in the documented
// order: request id, then epoch, then status, then revision.

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
			ErrSessionNotFound, sid)
	default: // create, over a tombstone or above the epoch floor
		deleted, err := t.DeletedEpoch(sid)
		if err != nil {
			return SaveResult{}, err
		}
		if req.Epoch != 0 && req.Epoch <= deleted {
			return SaveResult{}, &StateError{Err: ErrSessionFenced, CurrentEpoch: deleted,
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
	if c.Begun {
		return BeginResult{IdempotencyKey: c.IdempotencyKey, AlreadyBegun: true}, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return BeginResult{}, err
	}
	c.Begun = true
	c.IdempotencyKey = hex.EncodeToString(b[:])
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

// ResumeHead increments the session's epoch and returns its latest
// revision. A completed or failed session is returned unchanged, writing
// nothing, unless reopen is set: then it becomes active and is resumed.
func ResumeHead(t Txn, sessionID string, reopen bool) (Checkpoint, error) {
	h, err := MustHead(t, sessionID)
	if err != nil {
		return Checkpoint{}, err
	}
	// Read the revision first: a session that cannot be read is not resumed.
	r, err := t.Revision(sessionID, h, 0)
	if err != nil {
		return Checkpoint{}, err
	}
	cp := CheckpointOf(sessionID, h, r)
	if cp.Status != StatusActive {
		if !reopen {
			return cp, nil // returned as it is, not taken over
		}
		h.Status, h.FinalOutput, h.CompleteTime = StatusActive, "", time.Time{}
		cp.Status, cp.FinalOutput, cp.CompleteTime = StatusActive, "", time.Time{}
	}
	h.Epoch++
	h.Resumed = true
	cp.Epoch = h.Epoch
	return cp, t.PutHead(sessionID, h)
}

// Complete sets the session's status to completed or failed, with its final
// output, without making a revision.
func Complete(t Txn, req *CompleteRequest, now time.Time) (CompleteResult, error) {
	sid := req.SessionID
	h, err := MustHead(t, sid)
	if err != nil {
		return CompleteResult{}, err
	}
	fp := req.Fingerprint()
	prev, err := Replay(t, h, sid, req.RequestID, fp)
	if err != nil {
		return CompleteResult{}, err
	}
	if prev != nil {
		return CompleteResult{Revision: prev.Revision, Epoch: prev.Epoch, Status: req.Status}, nil
	}
	if err := Fence(sid, h.Epoch, h.Revision, h.Resumed, req.Epoch); err != nil {
		return CompleteResult{}, err
	}
	res := CompleteResult{Revision: h.Revision, Epoch: h.Epoch, Status: req.Status}
	if h.Status != StatusActive {
		if h.Status == req.Status && h.FinalOutput == req.FinalOutput {
			res.Already = true
			return res, nil
		}
		return CompleteResult{}, &StateError{Err: ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q is %s already, with another status or final output; resume it with reopen to change it", sid, strings.ToLower(h.Status.String()))}
	}
	h.Status, h.FinalOutput, h.CompleteTime = req.Status, req.FinalOutput, now
	h.UpdateTime = now
	if req.RequestID != "" {
		if err := t.PutRequest(sid, &RequestRecord{RequestID: req.RequestID, Fingerprint: fp, Revision: res.Revision, Epoch: res.Epoch}); err != nil {
			return CompleteResult{}, err
		}
	}
	return res, t.PutHead(sid, h)
}

// Rewind makes a new latest revision equal to req.Revision, fenced like a
// save. Its pending calls become pending again with their ledger entries
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
		c, err := t.Call(sid, u.ID)
		if err != nil {
			return BranchResult{}, err
		}
		if c == nil {
			c = &LedgerEntry{ToolUseID: u.ID, Name: u.Name, Class: u.Class, BeginTracked: u.BeginTracked}
		}
		c.LastPendingRevision = rev // pending again: BeginEffect works, a recorded effect is reused
		if err := t.PutCall(sid, c); err != nil {
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
	err = t.EachCall(sessionID, func(c *LedgerEntry) (bool, error) {
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
// status are the session's now, not the revision's.
func CheckpointOf(sessionID string, h *HeadRecord, r *RevisionRecord) Checkpoint {
	return Checkpoint{
		SessionID: sessionID, Revision: r.Revision, Epoch: h.Epoch, Task: r.Task, Turn: r.Turn,
		TokensUsed: r.TokensUsed, MessageCount: r.MessageCount, PendingToolUses: r.Pending,
		StateJSON: r.StateJSON, Labels: maps.Clone(r.Labels), SaveTime: r.SaveTime,
		Status: h.Status, FinalOutput: h.FinalOutput, CompleteTime: h.CompleteTime,
	}
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
		return fmt.Errorf("%w: %s", ErrCorrupt, msg)
	}
	return &StateError{Err: ErrCorrupt, Msg: msg, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch}
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
