package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Every write locks its session's row first (FOR UPDATE, through head or
// mustHead with lock set), then checks and writes under that lock, in the
// group commit (commit.go).

func (s *Store) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	var res core.SaveResult
	err := s.write(ctx, req.SessionID, func(ctx context.Context, q *query) error {
		var err error
		res, err = s.save(ctx, q, req)
		return err
	})
	return res, err
}

func (s *Store) save(ctx context.Context, q *query, req *core.SaveRequest) (core.SaveResult, error) {
	id := req.SessionID
	h, tomb, err := q.head(ctx, id, true)
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
		var r requestRec
		found, err := q.get(ctx, h, id, requestKey(id, req.RequestID), &r, false)
		if err != nil {
			return core.SaveResult{}, err
		}
		if found {
			if string(r.Fingerprint) != string(fp) {
				return core.SaveResult{}, fmt.Errorf("%w: request id %s was already used for a different save of session %q; make a new id for a new save",
					core.ErrRequestIDReused, req.RequestID, id)
			}
			return core.SaveResult{Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch}, nil
		}
	}

	// (2) epoch, then (3) revision.
	var prev revisionRec
	now := nanos(s.now())
	insert := false // the session's row is new
	switch {
	case h != nil:
		if err := fence(h, id, req.Epoch); err != nil {
			return core.SaveResult{}, err
		}
		if err := active(h, id); err != nil {
			return core.SaveResult{}, err
		}
		if req.ExpectedRevision == 0 {
			return core.SaveResult{}, &core.StateError{Err: core.ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; resume it, or delete it to start over", id, h.Revision)}
		}
		if req.ExpectedRevision != h.Revision {
			return core.SaveResult{}, &core.StateError{Err: core.ErrRevisionMismatch, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is at revision %d, not %d; reload it before saving", id, h.Revision, req.ExpectedRevision)}
		}
		found, err := q.get(ctx, h, id, revisionKey(id, h.Revision), &prev, false)
		if err != nil {
			return core.SaveResult{}, err
		}
		if !found {
			return core.SaveResult{}, corrupt(h, id, fmt.Errorf("revision %d is missing", h.Revision))
		}
	case req.ExpectedRevision != 0:
		return core.SaveResult{}, fmt.Errorf("%w: session %q does not exist; create it with expected_revision 0",
			core.ErrSessionNotFound, id)
	default: // create, possibly over a tombstone
		h = &sessionRec{Epoch: 1, CreateTime: now}
		insert = tomb == nil
		if tomb != nil {
			if req.Epoch != 0 && req.Epoch <= tomb.Epoch {
				return core.SaveResult{}, &core.StateError{Err: core.ErrSessionFenced, CurrentEpoch: tomb.Epoch,
					Msg: fmt.Sprintf("session %q was deleted at epoch %d; epoch %d is stale", id, tomb.Epoch, req.Epoch)}
			}
			h.Epoch = tomb.Epoch + 1
		}
	}
	if insert {
		// Insert the row first: a concurrent creator then waits on it and
		// fails with a unique violation, and runs again to find it (runOne).
		if err := q.putHead(ctx, id, h, true); err != nil {
			return core.SaveResult{}, err
		}
	}

	// History: keep a prefix of the previous revision's segments, then append.
	count := prev.MessageCount
	keep := count
	if req.KeepMessages != nil {
		keep = *req.KeepMessages
		if keep > count {
			return core.SaveResult{}, &core.StateError{Err: core.ErrKeepOutOfRange, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("keep_messages %d is beyond the %d stored messages of session %q", keep, count, id)}
		}
	}
	segments := truncateSegments(prev.Segments, keep)
	if n := uint64(len(req.AppendMessages)); n > 0 {
		first := h.NextSeq
		if err := q.putMessages(ctx, id, first, req.AppendMessages); err != nil {
			return core.SaveResult{}, err
		}
		h.NextSeq += n
		if last := len(segments) - 1; last >= 0 && segments[last].FirstSeq+segments[last].Count == first {
			segments[last].Count += n
		} else {
			segments = append(segments, segment{FirstSeq: first, Count: n})
		}
	}
	newCount := keep + uint64(len(req.AppendMessages))
	rev := h.Revision + 1

	// Pending tool uses: refuse one already recorded; remember each call.
	pending := make([]toolUseRec, 0, len(req.PendingToolUses))
	for _, u := range req.PendingToolUses {
		var call callRec
		if _, err := q.call(ctx, id, h, u.ID, &call); err != nil {
			return core.SaveResult{}, err
		}
		if call.Effect != nil {
			return core.SaveResult{}, &core.StateError{Err: core.ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; append its result instead of making it pending again", u.ID)}
		}
		// The revision keeps the whole tool use; the call record needs only
		// what RecordEffect checks, so a large input is not stored twice.
		call.Name, call.Class, call.BeginTracked = u.Name, int(u.Class), u.BeginTracked
		call.LastPendingRevision = rev
		if err := q.putCall(ctx, id, u.ID, &call); err != nil {
			return core.SaveResult{}, err
		}
		pending = append(pending, toolUseRecOf(u))
	}

	rec := &revisionRec{
		Revision: rev, Epoch: h.Epoch, Task: req.Task, Turn: req.Turn, TokensUsed: req.TokensUsed,
		Segments: segments, MessageCount: newCount, Pending: pending, StateJSON: req.StateJSON,
		Labels: req.Labels, SaveTime: now,
	}
	if err := q.put(ctx, revisionKey(id, rev), rec, false); err != nil {
		return core.SaveResult{}, err
	}
	res := core.SaveResult{Revision: rev, MessageCount: newCount, Epoch: h.Epoch}
	h.Revision = rev
	h.UpdateTime = now
	h.Task, h.Turn, h.MessageCount = req.Task, req.Turn, newCount
	h.PendingCount = uint32(len(pending))
	h.Labels = req.Labels
	if req.RequestID != "" {
		if err := q.put(ctx, requestKey(id, req.RequestID), &requestRec{
			Fingerprint: fp, Revision: res.Revision, MessageCount: res.MessageCount, Epoch: res.Epoch,
		}, false); err != nil {
			return core.SaveResult{}, err
		}
	}
	return res, q.putHead(ctx, id, h, false)
}

// truncateSegments returns the segments covering the first keep messages, as
// a new slice.
func truncateSegments(segs []segment, keep uint64) []segment {
	out := make([]segment, 0, len(segs)+1)
	for _, sg := range segs {
		if keep == 0 {
			break
		}
		n := min(sg.Count, keep)
		out = append(out, segment{FirstSeq: sg.FirstSeq, Count: n})
		keep -= n
	}
	return out
}

func (s *Store) BeginEffect(ctx context.Context, sessionID, toolUseID string, epoch uint64) (core.BeginResult, error) {
	var res core.BeginResult
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, true)
		if err != nil {
			return err
		}
		if err := fence(h, sessionID, epoch); err != nil {
			return err
		}
		if err := active(h, sessionID); err != nil {
			return err
		}
		var call callRec
		found, err := q.call(ctx, sessionID, h, toolUseID, &call)
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
		call.BeginTime = nanos(s.now())
		res = core.BeginResult{IdempotencyKey: call.IdempotencyKey}
		return q.putCall(ctx, sessionID, toolUseID, &call)
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	var stored core.Effect
	var already bool
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		e := e // a run again starts from the request
		already = false
		h, err := q.mustHead(ctx, sessionID, true)
		if err != nil {
			return err
		}
		var call callRec
		found, err := q.call(ctx, sessionID, h, e.ToolUseID, &call)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: tool use %q was never pending in session %q; save it as pending at Point A before recording its effect",
				core.ErrCallUnknown, e.ToolUseID, sessionID)
		}
		if e.Name == "" {
			e.Name = call.Name
		}
		if e.Name != call.Name {
			return fmt.Errorf("%w: tool use %q is a call of %q, not %q", core.ErrToolNameMismatch, e.ToolUseID, call.Name, e.Name)
		}
		if call.Effect != nil {
			stored = call.Effect.effect(e.ToolUseID)
			if !stored.SameOutcome(e) {
				return &core.StateError{Err: core.ErrEffectConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
					Msg: fmt.Sprintf("tool use %q already has a different recorded effect; the first record stands", e.ToolUseID)}
			}
			already = true
			return nil
		}
		now := s.now()
		e.RecordTime = now
		e.Late = call.LastPendingRevision != h.Revision
		call.Effect = &effectRec{Name: e.Name, Output: e.Output, IsError: e.IsError, RecordTime: nanos(now), Late: e.Late}
		stored = call.Effect.effect(e.ToolUseID)
		return q.putCall(ctx, sessionID, e.ToolUseID, &call)
	})
	return stored, already, err
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	var cp core.Checkpoint
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, true)
		if err != nil {
			return err
		}
		// Read the revision first: a session that cannot be read is not resumed.
		if cp, err = q.checkpoint(ctx, sessionID, h, 0); err != nil {
			return err
		}
		if cp.Status != core.StatusActive {
			if !reopen {
				return nil // returned as it is, not taken over
			}
			reactivate(h, &cp)
		}
		h.Epoch++
		h.Resumed = true
		cp.Epoch = h.Epoch
		return q.putHead(ctx, sessionID, h, false)
	})
	return cp, err
}

func (s *Store) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	var tombEpoch uint64
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, true)
		switch {
		case errors.Is(err, core.ErrCorrupt):
			// A session whose head cannot be decoded can still be deleted.
			// Its epoch is unknown: the tombstone takes the highest epoch
			// any readable revision was saved under, or the caller's.
			// The row is locked: the lock is taken before the record is decoded.
			saved, err := q.savedEpoch(ctx, sessionID)
			if err != nil {
				return err
			}
			tombEpoch = max(epoch, saved)
		case err != nil:
			return err
		default:
			if err := fence(h, sessionID, epoch); err != nil {
				return err
			}
			tombEpoch = h.Epoch
		}
		for _, t := range tables[1:] {
			if _, err := q.tx.Exec(ctx, "DELETE FROM "+s.table(t)+" WHERE session_id = $1", []byte(sessionID)); err != nil {
				return err
			}
		}
		return q.putHead(ctx, sessionID, &sessionRec{Deleted: true, Epoch: tombEpoch, UpdateTime: nanos(s.now())}, false)
	})
	return tombEpoch, err
}

// savedEpoch returns the highest epoch among the session's readable
// revisions.
func (q *query) savedEpoch(ctx context.Context, sessionID string) (uint64, error) {
	rows, err := q.tx.Query(ctx, "SELECT revision, record, checksum FROM "+q.s.table("revisions")+" WHERE session_id = $1", []byte(sessionID))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var top uint64
	for rows.Next() {
		var rev, sum int64
		var rec []byte
		if err := rows.Scan(&rev, &rec, &sum); err != nil {
			return 0, err
		}
		var r revisionRec
		if decode("revisions", revisionKey(sessionID, uint64(rev)).sum, rec, sum, &r) == nil {
			top = max(top, r.Epoch)
		}
	}
	return top, rows.Err()
}
