package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

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
