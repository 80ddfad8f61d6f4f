package badgerstore

import (
	"errors"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// pendingCalls returns the latest revision of the live session h and its
// pending calls, each with its begin marker and recorded effect.
func pendingCalls(t *tx, sessionID string, h *storagev1.SessionRecord) (uint64, []core.PendingCall, error) {
	rec, err := revision(t, sessionID, h, 0)
	if err != nil {
		return 0, nil, err
	}
	var calls []core.PendingCall
	for _, u := range rec.PendingToolUses {
		var call storagev1.CallRecord
		if _, err := get(t, h, sessionID, callKey(sessionID, u.ToolUseId), &call); err != nil {
			return 0, nil, err
		}
		pc := core.PendingCall{ToolUse: toolUseFromRecord(u), Begun: call.Begun, IdempotencyKey: call.IdempotencyKey}
		if call.Effect != nil {
			e := effectFromRecord(call.Effect)
			pc.Effect = &e
		}
		calls = append(calls, pc)
	}
	return rec.Revision, calls, nil
}

// inDoubtCount is how many of the live session h's pending calls Reconcile
// decides DecisionInDoubt. Damaged pending calls count as all in doubt, so
// that ListSessions still lists the session for an operator to find.
func inDoubtCount(t *tx, sessionID string, h *storagev1.SessionRecord) (uint32, error) {
	if h.PendingToolUseCount == 0 {
		return 0, nil
	}
	_, calls, err := pendingCalls(t, sessionID, h)
	if errors.Is(err, core.ErrCorrupt) {
		return h.PendingToolUseCount, nil
	}
	if err != nil {
		return 0, err
	}
	return core.InDoubtCount(calls), nil
}
