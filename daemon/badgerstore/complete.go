package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// active refuses a write that needs an active session when h is completed
// or failed.
func active(h *storagev1.SessionRecord, sessionID string) error {
	return core.Active(&core.HeadRecord{Revision: h.Revision, Epoch: h.Epoch, Status: statusFromRecord(h)}, sessionID)
}

// CompleteSession sets the head's status and final output; the revision
// stays. A request id is remembered like a save's, in the same records.
func (s *Store) CompleteSession(ctx context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	if err := ctx.Err(); err != nil {
		return core.CompleteResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.CompleteResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Complete(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}
