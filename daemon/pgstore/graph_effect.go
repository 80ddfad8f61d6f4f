package pgstore

import (
	"context"
	"errors"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TODO(pgstore ledger): placeholder until the PostgreSQL graph ledger lands.
var errNoLedger = errors.New("the graph-thread ledger is not implemented on PostgreSQL yet")

// BeginThreadEffect implements core.GraphStore.
func (s *Store) BeginThreadEffect(ctx context.Context, b *core.ThreadEffectBegin) (core.ThreadEffectBeginResult, error) {
	return core.ThreadEffectBeginResult{}, errNoLedger
}

// RecordThreadEffect implements core.GraphStore.
func (s *Store) RecordThreadEffect(ctx context.Context, r *core.ThreadEffectRecord) (core.ThreadEffectRecordResult, error) {
	return core.ThreadEffectRecordResult{}, errNoLedger
}

// ListThreadEffects implements core.GraphStore.
func (s *Store) ListThreadEffects(ctx context.Context, thread string, after core.ThreadEffectKey, limit int) ([]core.ThreadEffect, error) {
	return nil, errNoLedger
}
