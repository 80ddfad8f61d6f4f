package badgerstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// fence rejects an epoch that is not the owner's: older than the session's,
// newer than it, or 0 once the session has been resumed.
func fence(h *storagev1.SessionRecord, sessionID string, epoch uint64) error {
	return core.Fence(sessionID, h.Epoch, h.Revision, h.Resumed, epoch)
}

func (s *Store) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	if err := ctx.Err(); err != nil {
		return core.SaveResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.SaveResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = s.save(t, req)
		return err
	})
	return res, err
}

func (s *Store) save(t *tx, req *core.SaveRequest) (core.SaveResult, error) {
	sid := req.SessionID
	h, tomb, err := head(t, sid)
	if err != nil {
		return core.SaveResult{}, err
	}
	var fp []byte // the payload's digest, only for a save with a request id
	if req.RequestID != "" {
		fp = req.Fingerprint()
	}

	// (1) request id: a retry returns the original response. Every save's id
	// is remembered for the life of the session.
	if h != nil && req.RequestID != "" {
		var r storagev1.RequestRecord
		found, err := get(t, h, sid, requestKey(sid, req.RequestID), &r)
		if err != nil {
			return core.SaveResult{}, err
		}
		if found {
			if string(r.Fingerprint) != string(fp) {
				return core.SaveResult{}, fmt.Errorf("%w: request id %s was already used for a different save of session %q; make a new id for a new save",
					core.ErrRequestIDReused, req.RequestID, sid)
			}
			return core.SaveResult{Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch}, nil
		}
	}

	// (2) epoch, then (3) revision. The head holds what the save needs of
	// the previous revision (its message count and segments), so no
	// revision is read.
	now := timestamppb.New(s.now())
	switch {
	case h != nil:
		if err := fence(h, sid, req.Epoch); err != nil {
			return core.SaveResult{}, err
		}
		if err := active(h, sid); err != nil {
			return core.SaveResult{}, err
		}
		if req.ExpectedRevision == 0 {
			return core.SaveResult{}, &core.StateError{Err: core.ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; resume it, or delete it to start over", sid, h.Revision)}
		}
		if req.ExpectedRevision != h.Revision {
			return core.SaveResult{}, &core.StateError{Err: core.ErrRevisionMismatch, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is at revision %d, not %d; reload it before saving", sid, h.Revision, req.ExpectedRevision)}
		}
	case req.ExpectedRevision != 0:
		return core.SaveResult{}, fmt.Errorf("%w: session %q does not exist; create it with expected_revision 0",
			core.ErrSessionNotFound, sid)
	default: // create, over a tombstone or above the epoch floor
		deleted, err := deletedEpoch(t, sid, tomb)
		if err != nil {
			return core.SaveResult{}, err
		}
		if req.Epoch != 0 && req.Epoch <= deleted {
			return core.SaveResult{}, &core.StateError{Err: core.ErrSessionFenced, CurrentEpoch: deleted,
				Msg: fmt.Sprintf("session %q was deleted at epoch %d or earlier; epoch %d is stale", sid, deleted, req.Epoch)}
		}
		h = &storagev1.SessionRecord{Epoch: deleted + 1, CreateTime: now}
	}

	// History: keep a prefix of the previous revision's segments, then append.
	count := h.MessageCount
	if n := segmentsCount(h.Segments); n != count {
		return core.SaveResult{}, corrupt(h, sid, fmt.Errorf("the head lists %d messages in its segments but counts %d", n, count))
	}
	keep := count
	if req.KeepMessages != nil {
		keep = *req.KeepMessages
		if keep > count {
			return core.SaveResult{}, &core.StateError{Err: core.ErrKeepOutOfRange, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("keep_messages %d is beyond the %d stored messages of session %q", keep, count, sid)}
		}
	}
	segments := truncateSegments(h.Segments, keep)
	if n := uint64(len(req.AppendMessages)); n > 0 {
		first := h.NextSeq
		for i, m := range req.AppendMessages {
			key := messageKey(sid, first+uint64(i))
			if err := put(t, key, &storagev1.Message{Role: m.Role, ContentJson: m.ContentJSON}); err != nil {
				return core.SaveResult{}, err
			}
		}
		h.NextSeq += n
		if last := len(segments) - 1; last >= 0 && segments[last].FirstSeq+segments[last].Count == first {
			segments[last] = &storagev1.Segment{FirstSeq: segments[last].FirstSeq, Count: segments[last].Count + n}
		} else {
			segments = append(segments, &storagev1.Segment{FirstSeq: first, Count: n})
		}
	}
	newCount := keep + uint64(len(req.AppendMessages))
	rev := h.Revision + 1

	// Pending tool uses: refuse one already recorded; remember each call.
	pending := make([]*storagev1.ToolUse, 0, len(req.PendingToolUses))
	for _, u := range req.PendingToolUses {
		tu := toolUseRecord(u)
		var call storagev1.CallRecord
		key := callKey(sid, u.ID)
		if _, err := get(t, h, sid, key, &call); err != nil {
			return core.SaveResult{}, err
		}
		if call.Effect != nil {
			return core.SaveResult{}, &core.StateError{Err: core.ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; append its result instead of making it pending again", u.ID)}
		}
		// The revision keeps the whole tool use; the call record needs only
		// what RecordEffect checks, so a large input is not stored twice.
		call.ToolUse = &storagev1.ToolUse{ToolUseId: tu.ToolUseId, Name: tu.Name, EffectClass: tu.EffectClass, BeginTracked: tu.BeginTracked}
		call.LastPendingRevision = rev
		if err := put(t, key, &call); err != nil {
			return core.SaveResult{}, err
		}
		pending = append(pending, tu)
	}

	rec := &storagev1.RevisionRecord{
		Revision:        rev,
		Epoch:           h.Epoch,
		Task:            req.Task,
		Turn:            req.Turn,
		TokensUsed:      req.TokensUsed,
		Segments:        segments,
		MessageCount:    newCount,
		PendingToolUses: pending,
		StateJson:       req.StateJSON,
		Labels:          req.Labels,
		SaveTime:        now,
	}
	if err := put(t, revisionKey(sid, rev), rec); err != nil {
		return core.SaveResult{}, err
	}

	res := core.SaveResult{Revision: rev, MessageCount: newCount, Epoch: h.Epoch}
	h.Revision = rev
	h.UpdateTime = now
	h.Task, h.Turn, h.MessageCount = req.Task, req.Turn, newCount
	h.PendingToolUseCount = uint32(len(pending))
	h.Labels = req.Labels
	h.Segments = segments
	if req.RequestID != "" {
		if err := put(t, requestKey(sid, req.RequestID), &storagev1.RequestRecord{
			RequestId: req.RequestID, Fingerprint: fp, Revision: res.Revision, MessageCount: res.MessageCount, Epoch: res.Epoch,
		}); err != nil {
			return core.SaveResult{}, err
		}
	}
	return res, put(t, sessionKey(sid), h)
}

// deletedEpoch returns the epoch a session was last deleted at: its
// tombstone's, or when it has none (never deleted, or its tombstone
// expired), the epoch floor, which is at least that of every expired
// tombstone.
func deletedEpoch(t *tx, sid string, tomb *storagev1.SessionRecord) (uint64, error) {
	if tomb != nil {
		return tomb.Epoch, nil
	}
	var floor storagev1.EpochFloorRecord
	if _, err := get(t, nil, sid, epochFloorKey, &floor); err != nil {
		return 0, err
	}
	return floor.Epoch, nil
}

func segmentsCount(segs []*storagev1.Segment) uint64 {
	var n uint64
	for _, sg := range segs {
		n += sg.Count
	}
	return n
}

// truncateSegments returns the segments covering the first keep messages, as
// a new slice: the previous revision's record is never changed.
func truncateSegments(segs []*storagev1.Segment, keep uint64) []*storagev1.Segment {
	out := make([]*storagev1.Segment, 0, len(segs)+1)
	for _, sg := range segs {
		if keep == 0 {
			break
		}
		n := min(sg.Count, keep)
		out = append(out, &storagev1.Segment{FirstSeq: sg.FirstSeq, Count: n})
		keep -= n
	}
	return out
}

func (s *Store) BeginEffect(ctx context.Context, sessionID, toolUseID string, epoch uint64) (core.BeginResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BeginResult{}, err
	}
	defer s.lock(sessionID)()
	var res core.BeginResult
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		if err := fence(h, sessionID, epoch); err != nil {
			return err
		}
		if err := active(h, sessionID); err != nil {
			return err
		}
		var call storagev1.CallRecord
		key := callKey(sessionID, toolUseID)
		found, err := get(t, h, sessionID, key, &call)
		if err != nil {
			return err
		}
		if !found || call.LastPendingRevision != h.Revision {
			return &core.StateError{Err: core.ErrCallNotPending, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q is not pending in revision %d of session %q; save it as pending at Point A first", toolUseID, h.Revision, sessionID)}
		}
		if call.Effect != nil {
			return &core.StateError{Err: core.ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; reuse it instead of running the tool again", toolUseID)}
		}
		if call.Begun {
			res = core.BeginResult{IdempotencyKey: call.IdempotencyKey, AlreadyBegun: true}
			return nil
		}
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		call.Begun = true
		call.IdempotencyKey = hex.EncodeToString(b[:])
		call.BeginTime = timestamppb.New(s.now())
		res = core.BeginResult{IdempotencyKey: call.IdempotencyKey}
		return put(t, key, &call)
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	if err := ctx.Err(); err != nil {
		return core.Effect{}, false, err
	}
	defer s.lock(sessionID)()
	var stored core.Effect
	var already bool
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		var call storagev1.CallRecord
		key := callKey(sessionID, e.ToolUseID)
		found, err := get(t, h, sessionID, key, &call)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: tool use %q was never pending in session %q; save it as pending at Point A before recording its effect",
				core.ErrCallUnknown, e.ToolUseID, sessionID)
		}
		if e.Name == "" {
			e.Name = call.ToolUse.GetName()
		}
		if e.Name != call.ToolUse.GetName() {
			return fmt.Errorf("%w: tool use %q is a call of %q, not %q", core.ErrToolNameMismatch, e.ToolUseID, call.ToolUse.GetName(), e.Name)
		}
		if call.Effect != nil {
			stored = effectFromRecord(call.Effect)
			if !stored.SameOutcome(e) {
				return &core.StateError{Err: core.ErrEffectConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
					Msg: fmt.Sprintf("tool use %q already has a different recorded effect; the first record stands", e.ToolUseID)}
			}
			already = true
			return nil
		}
		e.RecordTime = s.now()
		e.Late = call.LastPendingRevision != h.Revision
		call.Effect = effectRecord(e)
		stored = e
		return put(t, key, &call)
	})
	return stored, already, err
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return core.Checkpoint{}, err
	}
	defer s.lock(sessionID)()
	var cp core.Checkpoint
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		// Read the revision first: a session that cannot be read is not resumed.
		if cp, err = checkpoint(t, sessionID, h, 0); err != nil {
			return err
		}
		if cp.Status != core.StatusActive {
			if !reopen {
				return nil // returned as it is, not taken over
			}
			h.Status, h.FinalOutput, h.CompleteTime = storagev1.SessionStatus_SESSION_STATUS_UNSPECIFIED, "", nil
			cp.Status, cp.FinalOutput, cp.CompleteTime = core.StatusActive, "", time.Time{}
		}
		h.Epoch++
		h.Resumed = true
		cp.Epoch = h.Epoch
		return put(t, sessionKey(sessionID), h)
	})
	return cp, err
}
