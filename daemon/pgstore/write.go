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
	ids := make([]string, len(req.PendingToolUses))
	for i, u := range req.PendingToolUses {
		ids[i] = u.ID
	}
	err := s.writeSession(ctx, req.SessionID, req.RequestID, ids, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Save(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) BeginEffect(ctx context.Context, req *core.BeginRequest) (core.BeginResult, error) {
	var res core.BeginResult
	err := s.writeSession(ctx, req.SessionID, req.RequestID, []string{req.ToolUseID}, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Begin(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) ApproveEffect(ctx context.Context, req *core.ApproveRequest) (core.ApproveResult, error) {
	var res core.ApproveResult
	err := s.writeSession(ctx, req.SessionID, req.RequestID, []string{req.ToolUseID}, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Approve(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	var stored core.Effect
	var already bool
	err := s.writeSession(ctx, sessionID, e.RequestID, []string{e.ToolUseID}, func(ctx context.Context, q *query) error {
		var err error
		stored, already, err = core.Record(&domainTxn{ctx: ctx, q: q, requestID: e.RequestID}, sessionID, e, s.now())
		return err
	})
	return stored, already, err
}

func (s *Store) ResolveEffect(ctx context.Context, req *core.ResolveRequest) (core.ResolveResult, error) {
	var res core.ResolveResult
	err := s.writeSession(ctx, req.SessionID, req.RequestID, []string{req.ToolUseID}, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Resolve(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

func (s *Store) Resume(ctx context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	var cp core.Checkpoint
	err := s.writeSession(ctx, sessionID, "", nil, func(ctx context.Context, q *query) error {
		var err error
		cp, err = core.Resume(&domainTxn{ctx: ctx, q: q}, sessionID, reopen)
		return err
	})
	return cp, err
}

func (s *Store) RegisterEffect(ctx context.Context, req *core.RegisterRequest) (core.BeginResult, error) {
	var res core.BeginResult
	err := s.writeSession(ctx, req.SessionID, req.RequestID, []string{req.ToolUse.ID}, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Register(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}
