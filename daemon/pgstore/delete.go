package pgstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// DeleteSession implements core.Store: under the session's row lock it
// deletes every row of the session and leaves a tombstone at the epoch
// core.TombstoneEpoch decides, in one transaction of the group commit.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	var tombEpoch uint64
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		// The head's row is locked before its record is decoded, so that a
		// corrupt head is deleted under the lock too.
		var err error
		tombEpoch, err = core.TombstoneEpoch(&domainTxn{ctx: ctx, q: q}, sessionID, epoch, func() (uint64, error) {
			return q.savedEpoch(ctx, sessionID)
		})
		if err != nil {
			return err
		}
		for _, t := range tables[1:] {
			if err := q.exec(ctx, "DELETE FROM "+s.table(t)+" WHERE session_id = $1", []byte(sessionID)); err != nil {
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
