package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// afterRevision is core.AfterRevision of one of the session's revisions.
func afterRevision(t *tx, sessionID string, h *storagev1.SessionRecord, rec *storagev1.RevisionRecord) (performed, inDoubt []core.LedgerEntry, err error) {
	r := revisionFromRecord(rec)
	return core.AfterRevision(&domainTxn{t: t, rec: h}, sessionID, &r)
}

// eachLedgerEntry calls fn with every ledger entry of the session, in tool use id
// order.
func eachLedgerEntry(t *tx, sessionID string, h *storagev1.SessionRecord, fn func(id string, call *storagev1.LedgerEntryRecord) error) error {
	prefix := sessionScope(kindLedgerEntry, sessionID)
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		var call storagev1.LedgerEntryRecord
		if err := it.Item().Value(func(v []byte) error { return decodeValue(key, v, &call) }); err != nil {
			return corrupt(h, sessionID, err)
		}
		if err := fn(string(key[len(prefix):]), &call); err != nil {
			return err
		}
	}
	return nil
}

func ledgerEntry(id string, call *storagev1.LedgerEntryRecord) core.LedgerEntry {
	e := core.LedgerEntry{
		ToolUseID: id, Name: call.ToolUse.GetName(), Class: effectClassFromRecord(call.ToolUse.GetEffectClass()),
		BeginTracked: call.ToolUse.GetBeginTracked(), LastPendingRevision: call.LastPendingRevision,
		Begun: call.Begun, IdempotencyKey: call.IdempotencyKey, Registered: call.Registered,
		InputDigest: call.InputDigest, Repeatable: call.Repeatable,
		RunEpoch: call.RunEpoch, RunRevision: call.RunRevision, DuplicateOf: call.DuplicateOf, PendingSince: call.PendingSince,
	}
	if call.BeginTime != nil {
		e.BeginTime = call.BeginTime.AsTime()
	}
	e.Resolution = resolutionFromRecord(call.Resolution)
	e.Approval = approvalFromRecord(call.Approval)
	e.EarlierResolutions, e.EarlierApprovals = earlierFromRecords(call.EarlierResolutions, call.EarlierApprovals)
	if call.Effect != nil {
		eff := effectFromRecord(call.Effect)
		eff.ToolUseID = id
		if e.Resolution != nil && e.Resolution.Outcome == core.ResolvedDone {
			eff.Resolution = e.Resolution
		}
		e.Effect = &eff
	}
	return e
}

// Effects returns the ledger of a live session: its ledger entries that were
// begun, hold an effect, were resolved or were caught as duplicates, in
// tool use id order.
func (s *Store) Effects(ctx context.Context, sessionID, after string, limit int) ([]core.LedgerEntry, error) {
	var out []core.LedgerEntry
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		prefix := sessionScope(kindLedgerEntry, sessionID)
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		seek := prefix
		if after != "" {
			seek = ledgerEntryKey(sessionID, after)
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			id := string(key[len(prefix):])
			if id == after {
				continue
			}
			var call storagev1.LedgerEntryRecord
			if err := item.Value(func(v []byte) error { return decodeValue(key, v, &call) }); err != nil {
				return corrupt(h, sessionID, err)
			}
			if !call.Begun && call.Effect == nil && call.Resolution == nil && call.Approval == nil && len(call.EarlierApprovals) == 0 && call.DuplicateOf == "" {
				continue
			}
			out = append(out, ledgerEntry(id, &call))
		}
		return nil
	})
	return out, err
}
