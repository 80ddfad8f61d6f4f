package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// CompleteSession sets the head's status and final output; the revision
// stays. A request id is remembered like a save's, in the same records.
func (s *Store) CompleteSession(ctx context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.CompleteResult, error) { return core.Complete(t, req, s.now()) })
}
