package pgstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// callPage is how many call rows one query of the ledger reads; calls never
// begun nor recorded are read past.
const callPage = 256

// eachLedgerEntry calls fn with the session's ledger entries whose tool use ids are
// after the given one, in id order, until fn returns false or an error. A
// row that fails its checksum is core.ErrCheckpointCorrupt.
func (q *query) eachLedgerEntry(ctx context.Context, sessionID string, h *sessionRec, after string, fn func(id string, call *ledgerEntryRec) (more bool, err error)) error {
	if err := q.send(ctx, ""); err != nil { // the writes queued before it
		return err
	}
	cursor := []byte(after)
	for {
		page, err := q.keyedRows(ctx, "SELECT tool_use_id, record, checksum FROM "+q.s.table("calls")+
			" WHERE session_id = $1 AND tool_use_id > $2 ORDER BY tool_use_id LIMIT $3", []byte(sessionID), cursor, callPage)
		if err != nil {
			return err
		}
		for _, r := range page {
			id := string(r.key)
			var call ledgerEntryRec
			if err := decode("calls", ledgerEntryKey(sessionID, id).sum, r.rec, r.sum, &call); err != nil {
				return corrupt(h, sessionID, err)
			}
			more, err := fn(id, &call)
			if err != nil || !more {
				return err
			}
		}
		if len(page) < callPage {
			return nil
		}
		cursor = page[len(page)-1].key
	}
}

func ledgerEntry(id string, call *ledgerEntryRec) core.LedgerEntry {
	e := core.LedgerEntry{
		ToolUseID: id, Name: call.Name, Class: core.EffectClass(call.Class), BeginTracked: call.BeginTracked,
		LastPendingRevision: call.LastPendingRevision, Begun: call.Begun, IdempotencyKey: call.IdempotencyKey,
		BeginTime: fromNanos(call.BeginTime), Registered: call.Registered,
		InputDigest: call.InputDigest, Repeatable: call.Repeatable, RunEpoch: call.RunEpoch, RunRevision: call.RunRevision, DuplicateOf: call.DuplicateOf, PendingSince: call.PendingSince,
	}
	e.Resolution = call.Resolution.resolution()
	e.Approval = call.Approval.approval()
	e.EarlierResolutions, e.EarlierApprovals = call.earlier()
	if call.Effect != nil {
		eff := call.Effect.effect(id)
		if e.Resolution != nil && e.Resolution.Outcome == core.ResolvedDone {
			eff.Resolution = e.Resolution
		}
		e.Effect = &eff
	}
	return e
}

// Effects returns the ledger of a live session: its ledger entries that were
// begun, hold an effect, were resolved or were caught as duplicates, in
// tool use id order, from one
// snapshot.
func (s *Store) Effects(ctx context.Context, sessionID, after string, limit int) ([]core.LedgerEntry, error) {
	var out []core.LedgerEntry
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		out = out[:0]
		h, err := q.mustHead(ctx, sessionID, false)
		if err != nil {
			return err
		}
		if limit <= 0 {
			return nil
		}
		return q.eachLedgerEntry(ctx, sessionID, h, after, func(id string, call *ledgerEntryRec) (bool, error) {
			if call.Begun || call.Effect != nil || call.Resolution != nil || call.Approval != nil || len(call.EarlierApprovals) > 0 || call.DuplicateOf != "" {
				out = append(out, ledgerEntry(id, call))
			}
			return len(out) < limit, nil
		})
	})
	return out, err
}

// afterRevision is core.AfterRevision of one of the session's revisions.
func (q *query) afterRevision(ctx context.Context, sessionID string, h *sessionRec, rec *revisionRec) (performed, inDoubt []core.LedgerEntry, err error) {
	r := revisionOf(rec)
	return core.AfterRevision(&domainTxn{ctx: ctx, q: q, rec: h}, sessionID, &r)
}
