package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// A session's status lives in its head record (sessionRec.Status): empty,
// as in every record before schema version 2, is active.
const (
	recCompleted = "completed"
	recFailed    = "failed"
)

// status is the session's status; anything but completed or failed is
// active.
func (h *sessionRec) status() core.SessionStatus {
	switch h.Status {
	case recCompleted:
		return core.StatusCompleted
	case recFailed:
		return core.StatusFailed
	default:
		return core.StatusActive
	}
}

func statusRec(st core.SessionStatus) string {
	switch st {
	case core.StatusCompleted:
		return recCompleted
	case core.StatusFailed:
		return recFailed
	default:
		return ""
	}
}

// reactivate makes the completed or failed head h, and its checkpoint cp,
// active again, for a Resume with reopen.
func reactivate(h *sessionRec, cp *core.Checkpoint) {
	h.Status, h.FinalOutput, h.CompleteTime = "", "", 0
	cp.Status, cp.FinalOutput, cp.CompleteTime = core.StatusActive, "", time.Time{}
}

// active refuses a write that needs an active session when h is completed
// or failed.
func active(h *sessionRec, sessionID string) error {
	st := h.status()
	if st == core.StatusActive {
		return nil
	}
	return &core.StateError{Err: core.ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
		Msg: fmt.Sprintf("session %q is %s; resume it with reopen to continue it", sessionID, strings.ToLower(st.String()))}
}

// selects reports whether the live head h passes filter.
func selects(f core.SessionFilter, h *sessionRec) bool {
	switch {
	case f.Status != core.StatusAny && h.status() != f.Status:
		return false
	case f.HasPendingToolUses && h.PendingCount == 0:
		return false
	case !f.UpdatedBefore.IsZero() && !fromNanos(h.UpdateTime).Before(f.UpdatedBefore):
		return false
	}
	return core.HasLabels(h.Labels, f.Labels)
}

// sessionRequest looks up a request id of the session: found is true for a
// retry of the same request (r is its record), and a reuse of the id for
// another request is ErrRequestIDReused. Saves, completions, rewinds and
// forks share the session's request ids.
func (q *query) sessionRequest(ctx context.Context, h *sessionRec, sessionID, requestID string, fp []byte) (r *requestRec, found bool, err error) {
	if requestID == "" {
		return nil, false, nil
	}
	r = &requestRec{}
	found, err = q.get(ctx, h, sessionID, requestKey(sessionID, requestID), r, false)
	if err != nil || !found {
		return nil, false, err
	}
	if string(r.Fingerprint) != string(fp) {
		return nil, false, fmt.Errorf("%w: request id %s was already used for a different request to session %q; make a new id for a new request",
			core.ErrRequestIDReused, requestID, sessionID)
	}
	return r, true, nil
}

// CompleteSession sets the head's status and final output; the revision
// stays. A request id is remembered like a save's, in the same table.
func (s *Store) CompleteSession(ctx context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	var res core.CompleteResult
	err := s.write(ctx, req.SessionID, func(ctx context.Context, q *query) error {
		sid := req.SessionID
		res = core.CompleteResult{}
		h, err := q.mustHead(ctx, sid, true)
		if err != nil {
			return err
		}
		var fp []byte
		if req.RequestID != "" {
			fp = req.Fingerprint()
		}
		prev, retry, err := q.sessionRequest(ctx, h, sid, req.RequestID, fp)
		if err != nil {
			return err
		}
		if retry {
			res = core.CompleteResult{Revision: prev.Revision, Epoch: prev.Epoch, Status: req.Status}
			return nil
		}
		if err := fence(h, sid, req.Epoch); err != nil {
			return err
		}
		res = core.CompleteResult{Revision: h.Revision, Epoch: h.Epoch, Status: req.Status}
		if st := h.status(); st != core.StatusActive {
			if st == req.Status && h.FinalOutput == req.FinalOutput {
				res.Already = true
				return nil
			}
			return &core.StateError{Err: core.ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is %s already, with another status or final output; resume it with reopen to change it", sid, strings.ToLower(st.String()))}
		}
		now := nanos(s.now())
		h.Status, h.FinalOutput, h.CompleteTime = statusRec(req.Status), req.FinalOutput, now
		h.UpdateTime = now
		if req.RequestID != "" {
			if err := q.put(ctx, requestKey(sid, req.RequestID), &requestRec{
				Fingerprint: fp, Revision: res.Revision, Epoch: res.Epoch,
			}, false); err != nil {
				return err
			}
		}
		return q.putHead(ctx, sid, h, false)
	})
	return res, err
}
