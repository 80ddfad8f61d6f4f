package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// storeTarget is savepointd's own store (daemon/badgerstore) opened in
// this process, saving as the daemon's SaveCheckpoint does after it has
// decoded and checked a request: no gRPC, no interceptors, no process
// between. Its CPU per save (this process's) is the store's share of
// scenario 6's floor.
type storeTarget struct{}

func (storeTarget) Name() string { return "savepointd's store, in process" }

func (storeTarget) Open(_ context.Context, dir string) (Store, error) {
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		return nil, err
	}
	return &inProcessStore{s: s}, nil
}

type inProcessStore struct{ s *badgerstore.Store }

func (s *inProcessStore) Session(ctx context.Context, i int) (Writer, error) {
	w := &inProcessWriter{s: s.s, id: fmt.Sprintf("store-%d-%s", i, uuid.NewString()[:8])}
	res, err := s.s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: w.id, Task: benchTask})
	if err != nil {
		return nil, err
	}
	w.rev = res.Revision
	return w, nil
}

func (s *inProcessStore) Close() error { return s.s.Close() }

type inProcessWriter struct {
	s    *badgerstore.Store
	id   string
	rev  uint64
	turn uint32
}

func (w *inProcessWriter) Save(ctx context.Context, s *Save) error {
	if len(s.Pending) > 0 || w.turn == 0 {
		w.turn++
	}
	req := &core.SaveRequest{SessionID: w.id, ExpectedRevision: w.rev, RequestID: uuid.NewString(),
		Task: benchTask, Turn: w.turn, AppendMessages: coreMessages(s.Messages)}
	for _, p := range s.Pending {
		req.PendingToolUses = append(req.PendingToolUses, core.ToolUse{ID: p.GetToolUseId(), Name: p.GetName(), InputJSON: p.GetInputJson()})
	}
	res, err := w.s.SaveCheckpoint(ctx, req)
	if err != nil {
		return fmt.Errorf("store save %s at revision %d: %w", w.id, w.rev, err)
	}
	w.rev = res.Revision
	return nil
}

func coreMessages(ms []*savepointv1.Message) []core.Message {
	out := make([]core.Message, len(ms))
	for i, m := range ms {
		out[i] = core.Message{Role: m.GetRole(), ContentJSON: m.GetContentJson()}
	}
	return out
}
