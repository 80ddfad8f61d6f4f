package pgstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Every write locks its session's row first (FOR UPDATE, through head or
// mustHead with lock set), then checks and writes under that lock, in the
// group commit (commit.go).

func (s *Store) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	var res core.SaveResult
	err := s.write(ctx, req.SessionID, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Save(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) BeginEffect(ctx context.Context, sessionID, toolUseID string, epoch uint64) (core.BeginResult, error) {
	var res core.BeginResult
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Begin(&domainTxn{ctx: ctx, q: q}, sessionID, toolUseID, epoch, s.now())
		return err
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	var stored core.Effect
	var already bool
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		var err error
		stored, already, err = core.Record(&domainTxn{ctx: ctx, q: q}, sessionID, e, s.now())
		return err
	})
	return stored, already, err
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	var cp core.Checkpoint
	err := s.write(ctx, sessionID, func(ctx context.Context, q *query) error {
		var err error
		cp, err = core.Resume(&domainTxn{ctx: ctx, q: q}, sessionID, reopen)
		return err
	})
	return cp, err
}

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
