package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

func (s *Store) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	if err := ctx.Err(); err != nil {
		return core.SaveResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.SaveResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Save(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
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
	if err := ctx.Err(); err != nil {
		return core.BeginResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.BeginResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Begin(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) ApproveEffect(ctx context.Context, req *core.ApproveRequest) (core.ApproveResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ApproveResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.ApproveResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Approve(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	if err := ctx.Err(); err != nil {
		return core.Effect{}, false, err
	}
	defer s.lock(sessionID)()
	var stored core.Effect
	var already bool
	err := s.update(func(t *tx) error {
		var err error
		stored, already, err = core.Record(&domainTxn{t: t}, sessionID, e, s.now())
		return err
	})
	return stored, already, err
}

func (s *Store) ResolveEffect(ctx context.Context, req *core.ResolveRequest) (core.ResolveResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ResolveResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.ResolveResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Resolve(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return core.Checkpoint{}, err
	}
	defer s.lock(sessionID)()
	var cp core.Checkpoint
	err := s.update(func(t *tx) error {
		var err error
		cp, err = core.Resume(&domainTxn{t: t}, sessionID, reopen)
		return err
	})
	return cp, err
}

func (s *Store) RegisterEffect(ctx context.Context, req *core.RegisterRequest) (core.BeginResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BeginResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.BeginResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Register(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}
