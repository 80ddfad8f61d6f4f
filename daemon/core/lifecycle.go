package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Resume increments the session's epoch and returns its latest
// revision. A completed or failed session is returned unchanged, writing
// nothing, unless reopen is set: then it becomes active and is resumed.
func Resume(t Txn, sessionID string, reopen bool) (Checkpoint, error) {
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

// TombstoneEpoch decides a DeleteSession by a writer at epoch: the epoch the
// session's tombstone keeps, so that every writer of the deleted session
// stays fenced from the id. A live session is fenced as a save is and keeps
// its epoch. A session whose head cannot be decoded can still be deleted:
// its tombstone takes the higher of epoch and savedEpoch(), the highest
// epoch a readable revision of it was saved under.
func TombstoneEpoch(t Txn, sessionID string, epoch uint64, savedEpoch func() (uint64, error)) (uint64, error) {
	h, err := MustHead(t, sessionID)
	switch {
	case errors.Is(err, ErrCheckpointCorrupt):
		saved, err := savedEpoch()
		if err != nil {
			return 0, err
		}
		return max(epoch, saved), nil
	case err != nil:
		return 0, err
	}
	if err := Fence(sessionID, h.Epoch, h.Revision, h.Resumed, epoch); err != nil {
		return 0, err
	}
	return h.Epoch, nil
}
