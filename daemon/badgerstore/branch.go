package badgerstore

import (
	"context"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// forkBatch bounds the messages a fork copies per commit, well under
// Badger's transaction limits.
const forkBatch = 500

// sessionRequest looks up a request id of the session: found is true for a
// retry of the same request (r is its record), and a reuse of the id for
// another request is ErrRequestIDReused.
func sessionRequest(t *tx, h *storagev1.SessionRecord, sessionID, requestID string, fp []byte) (r *core.RequestRecord, found bool, err error) {
	r, err = core.Replay(&domainTxn{t: t, rec: h}, nil, sessionID, requestID, fp)
	return r, r != nil, err
}

func (s *Store) RewindSession(ctx context.Context, req *core.RewindRequest) (core.BranchResult, error) {
	return updateSession(ctx, s, req.SessionID, func(t core.Txn) (core.BranchResult, error) { return core.Rewind(t, req, s.now()) })
}

// readForkSource reads what a fork of the session's revision revNum copies,
// from one snapshot: the history as the records it copies, apart.
func (s *Store) readForkSource(ctx context.Context, sid string, revNum uint64) (*core.ForkSource, []*storagev1.Message, error) {
	var src *core.ForkSource
	var messages []*storagev1.Message
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sid)
		if err != nil {
			return err
		}
		rec, err := revision(t, sid, h, revNum)
		if err != nil {
			return err
		}
		r := revisionFromRecord(rec)
		src = &core.ForkSource{Revision: &r}
		messages = nil
		for _, sg := range rec.Segments {
			for seq := sg.FirstSeq; seq < sg.FirstSeq+sg.Count; seq++ {
				var m storagev1.Message
				found, err := get(t, h, sid, messageKey(sid, seq), &m)
				if err != nil {
					return err
				}
				if !found {
					return corrupt(h, sid, fmt.Errorf("message %d of revision %d is missing", seq, rec.Revision))
				}
				messages = append(messages, &m)
			}
		}
		// The calls of the history: those pending in any kept revision up to
		// the one forked.
		inHistory := map[string]bool{}
		for _, u := range rec.PendingToolUses {
			inHistory[u.ToolUseId] = true
		}
		for r := uint64(1); r < rec.Revision; r++ {
			var old storagev1.RevisionRecord // one no longer kept adds none
			if _, err := get(t, h, sid, revisionKey(sid, r), &old); err != nil {
				return err
			}
			for _, u := range old.GetPendingToolUses() {
				inHistory[u.ToolUseId] = true
			}
		}
		err = eachLedgerEntry(t, sid, h, func(id string, call *storagev1.LedgerEntryRecord) error {
			if inHistory[id] {
				src.Ledger = append(src.Ledger, ledgerEntry(id, call))
			}
			return nil
		})
		if err != nil {
			return err
		}
		src.PerformedAfter, src.InDoubtAfter, err = afterRevision(t, sid, h, rec)
		return err
	})
	return src, messages, err
}

// ForkSession creates the new session in three steps under its lock: the
// target's check and a purge record, the history in batches of forkBatch,
// then the ledger, the revision and the head at once. Until the head is
// written the copy is unreachable, and the purge record makes the next Open
// remove a copy a crash interrupted.
func (s *Store) ForkSession(ctx context.Context, req *core.ForkRequest) (core.BranchResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BranchResult{}, err
	}
	nid := req.NewID
	defer s.lock(nid)()
	src, messages, err := s.readForkSource(ctx, req.SourceID, req.Revision)
	if err != nil {
		return core.BranchResult{}, err
	}
	var epoch uint64
	var res core.BranchResult
	retried := false
	// (1) The new session: a retry, or a create.
	err = s.update(func(t *tx) error {
		var prev *core.RequestRecord
		var err error
		if epoch, prev, err = core.ForkTarget(&domainTxn{t: t}, req); err != nil {
			return err
		}
		if prev != nil {
			res, retried = core.ForkRetried(src, prev), true
			return nil
		}
		return put(t, purgeKey(nid), &storagev1.PurgeRecord{Epoch: epoch - 1})
	})
	if err != nil || retried {
		return res, err
	}
	fail := func(err error) (core.BranchResult, error) {
		if perr := s.purge(nid); perr != nil {
			s.log.Error("removing an interrupted fork", "session_id", nid, "err", perr)
		}
		return core.BranchResult{}, err
	}
	// (2) The history, in batches.
	for start := 0; start < len(messages); start += forkBatch {
		batch := messages[start:min(start+forkBatch, len(messages))]
		err := s.update(func(t *tx) error {
			for i, m := range batch {
				if err := put(t, messageKey(nid, uint64(start+i)), m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fail(err)
		}
	}
	// (3) The ledger, the revision and the head, at once.
	err = s.update(func(t *tx) error {
		var err error
		if res, err = core.ForkWrite(&domainTxn{t: t}, req, src, epoch, s.now()); err != nil {
			return err
		}
		t.delete(purgeKey(nid))
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return res, nil
}
