package pgstore

import (
	"context"

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

// sessionRequest looks up a request id of the session: found is true for a
// retry of the same request (r is its record), and a reuse of the id for
// another request is ErrRequestIDReused. Saves, completions, rewinds and
// forks share the session's request ids.
func (q *query) sessionRequest(ctx context.Context, h *sessionRec, sessionID, requestID string, fp []byte) (r *core.RequestRecord, found bool, err error) {
	r, err = core.Replay(&domainTxn{ctx: ctx, q: q, rec: h}, nil, sessionID, requestID, fp)
	return r, r != nil, err
}

// CompleteSession sets the head's status and final output; the revision
// stays. A request id is remembered like a save's, in the same table.
func (s *Store) CompleteSession(ctx context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	var res core.CompleteResult
	err := s.writeSession(ctx, req.SessionID, req.RequestID, nil, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Complete(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}
