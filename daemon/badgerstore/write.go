package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// updateSession runs rule, a rule of core over the store's Txn, in one
// commit under the session's lock, and returns its answer.
func updateSession[R any](ctx context.Context, s *Store, sessionID string, rule func(t core.Txn) (R, error)) (R, error) {
	var res, zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	defer s.lock(sessionID)()
	err := s.update(func(t *tx) error {
		var err error
		res, err = rule(&domainTxn{t: t})
		return err
	})
	return res, err
}

func (s *Store) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.SaveResult, error) { return core.Save(t, req, s.now()) })
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

func (s *Store) BeginEffect(ctx context.Context, req *core.BeginRequest) (core.BeginResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.BeginResult, error) { return core.Begin(t, req, s.now()) })
}

func (s *Store) ApproveEffect(ctx context.Context, req *core.ApproveRequest) (core.ApproveResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.ApproveResult, error) { return core.Approve(t, req, s.now()) })
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	type recorded struct {
		stored  core.Effect
		already bool
	}
	r, err := updateSession(ctx, s, sessionID, func(t core.Txn) (recorded, error) {
		stored, already, err := core.Record(t, sessionID, e, s.now())
		return recorded{stored, already}, err
	})
	return r.stored, r.already, err
}

func (s *Store) ResolveEffect(ctx context.Context, req *core.ResolveRequest) (core.ResolveResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.ResolveResult, error) { return core.Resolve(t, req, s.now()) })
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	return updateSession(ctx, s, sessionID, func(t core.Txn) (core.Checkpoint, error) { return core.Resume(t, sessionID, reopen) })
}

func (s *Store) RegisterEffect(ctx context.Context, req *core.RegisterRequest) (core.BeginResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.BeginResult, error) { return core.Register(t, req, s.now()) })
}
