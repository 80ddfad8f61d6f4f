package badgerstore

import (
	"context"
	"fmt"
	"maps"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// forkBatch bounds the messages a fork copies per commit, well under
// Badger's transaction limits.
const forkBatch = 500

// afterRevision is core.AfterRevision of one of the session's revisions.
func afterRevision(t *tx, sessionID string, h *storagev1.SessionRecord, rec *storagev1.RevisionRecord) (performed, inDoubt []core.LedgerEntry, err error) {
	r := revisionFromRecord(rec)
	return core.AfterRevision(&domainTxn{t: t, rec: h}, sessionID, &r)
}

// eachCall calls fn with every call record of the session, in tool use id
// order.
func eachCall(t *tx, sessionID string, h *storagev1.SessionRecord, fn func(id string, call *storagev1.CallRecord) error) error {
	prefix := sessionScope(kindCall, sessionID)
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		var call storagev1.CallRecord
		if err := it.Item().Value(func(v []byte) error { return decodeValue(key, v, &call) }); err != nil {
			return corrupt(h, sessionID, err)
		}
		if err := fn(string(key[len(prefix):]), &call); err != nil {
			return err
		}
	}
	return nil
}

func ledgerEntry(id string, call *storagev1.CallRecord) core.LedgerEntry {
	e := core.LedgerEntry{
		ToolUseID: id, Name: call.ToolUse.GetName(), Class: effectClassFromRecord(call.ToolUse.GetEffectClass()),
		BeginTracked: call.ToolUse.GetBeginTracked(), LastPendingRevision: call.LastPendingRevision,
		Begun: call.Begun, IdempotencyKey: call.IdempotencyKey,
	}
	if call.BeginTime != nil {
		e.BeginTime = call.BeginTime.AsTime()
	}
	if call.Effect != nil {
		eff := effectFromRecord(call.Effect)
		eff.ToolUseID = id
		e.Effect = &eff
	}
	return e
}

// sessionRequest looks up a request id of the session: found is true for a
// retry of the same request (r is its record), and a reuse of the id for
// another request is ErrRequestIDReused.
func sessionRequest(t *tx, h *storagev1.SessionRecord, sessionID, requestID string, fp []byte) (r *core.RequestRecord, found bool, err error) {
	r, err = core.Replay(&domainTxn{t: t, rec: h}, nil, sessionID, requestID, fp)
	return r, r != nil, err
}

func (s *Store) RewindSession(ctx context.Context, req *core.RewindRequest) (core.BranchResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BranchResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.BranchResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = core.Rewind(&domainTxn{t: t}, req, s.now())
		return err
	})
	return res, err
}

// forkSource is what a fork reads of its source, from one snapshot.
type forkSource struct {
	rec      *storagev1.RevisionRecord
	messages []*storagev1.Message
	calls    map[string]*storagev1.CallRecord // the calls pending in revisions up to rec
	pending  map[string]bool                  // those pending in rec
	res      core.BranchResult
}

func (s *Store) readForkSource(ctx context.Context, sid string, revNum uint64) (*forkSource, error) {
	src := &forkSource{calls: map[string]*storagev1.CallRecord{}, pending: map[string]bool{}}
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sid)
		if err != nil {
			return err
		}
		if src.rec, err = revision(t, sid, h, revNum); err != nil {
			return err
		}
		for _, sg := range src.rec.Segments {
			for seq := sg.FirstSeq; seq < sg.FirstSeq+sg.Count; seq++ {
				var m storagev1.Message
				found, err := get(t, h, sid, messageKey(sid, seq), &m)
				if err != nil {
					return err
				}
				if !found {
					return corrupt(h, sid, fmt.Errorf("message %d of revision %d is missing", seq, src.rec.Revision))
				}
				src.messages = append(src.messages, &m)
			}
		}
		// The calls of the history: those pending in any kept revision up to
		// the one forked.
		inHistory := map[string]bool{}
		for _, u := range src.rec.PendingToolUses {
			inHistory[u.ToolUseId], src.pending[u.ToolUseId] = true, true
		}
		for r := uint64(1); r < src.rec.Revision; r++ {
			var old storagev1.RevisionRecord // one no longer kept adds none
			if _, err := get(t, h, sid, revisionKey(sid, r), &old); err != nil {
				return err
			}
			for _, u := range old.GetPendingToolUses() {
				inHistory[u.ToolUseId] = true
			}
		}
		err = eachCall(t, sid, h, func(id string, call *storagev1.CallRecord) error {
			if inHistory[id] {
				src.calls[id] = call
			}
			return nil
		})
		if err != nil {
			return err
		}
		src.res.PerformedAfter, src.res.InDoubtAfter, err = afterRevision(t, sid, h, src.rec)
		return err
	})
	return src, err
}

func (s *Store) ForkSession(ctx context.Context, req *core.ForkRequest) (core.BranchResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BranchResult{}, err
	}
	nid := req.NewID
	defer s.lock(nid)()
	fp := req.Fingerprint()
	src, err := s.readForkSource(ctx, req.SourceID, req.Revision)
	if err != nil {
		return core.BranchResult{}, err
	}
	res := src.res
	var epoch uint64
	retried := false
	// (1) The new session: a retry, or a create.
	err = s.update(func(t *tx) error {
		h, tomb, err := head(t, nid)
		if err != nil {
			return err
		}
		if h != nil {
			prev, retry, err := sessionRequest(t, h, nid, req.RequestID, fp)
			if err != nil {
				return err
			}
			if retry {
				retried = true
				res.Revision, res.Epoch, res.MessageCount = prev.Revision, prev.Epoch, prev.MessageCount
				return nil
			}
			return &core.StateError{Err: core.ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; fork into a new id, or delete it first", nid, h.Revision)}
		}
		deleted, err := deletedEpoch(t, nid, tomb)
		if err != nil {
			return err
		}
		epoch = deleted + 1
		// Until the head is written the copy is unreachable; the purge
		// record makes the next Open remove a copy a crash interrupted.
		return put(t, purgeKey(nid), &storagev1.PurgeRecord{Epoch: deleted})
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
	for start := 0; start < len(src.messages); start += forkBatch {
		batch := src.messages[start:min(start+forkBatch, len(src.messages))]
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
	n := uint64(len(src.messages))
	err = s.update(func(t *tx) error {
		now := timestamppb.New(s.now())
		for id, call := range src.calls {
			c := proto.CloneOf(call)
			c.LastPendingRevision = 0 // pending before the fork's first revision
			if src.pending[id] {
				c.LastPendingRevision = 1
			}
			if err := put(t, callKey(nid, id), c); err != nil {
				return err
			}
		}
		rec := proto.CloneOf(src.rec)
		rec.Revision, rec.Epoch, rec.SaveTime = 1, epoch, now
		rec.Segments = nil
		if n > 0 {
			rec.Segments = []*storagev1.Segment{{FirstSeq: 0, Count: n}}
		}
		if err := put(t, revisionKey(nid, 1), rec); err != nil {
			return err
		}
		if req.RequestID != "" {
			if err := put(t, requestKey(nid, req.RequestID), &storagev1.RequestRecord{
				RequestId: req.RequestID, Fingerprint: fp, Revision: 1, MessageCount: n, Epoch: epoch,
			}); err != nil {
				return err
			}
		}
		t.delete(purgeKey(nid))
		return put(t, sessionKey(nid), &storagev1.SessionRecord{
			Revision: 1, Epoch: epoch, NextSeq: n, CreateTime: now, UpdateTime: now,
			Task: rec.Task, Turn: rec.Turn, MessageCount: n, PendingToolUseCount: uint32(len(rec.PendingToolUses)),
			Labels: maps.Clone(rec.Labels), Segments: rec.Segments,
		})
	})
	if err != nil {
		return fail(err)
	}
	res.Revision, res.Epoch, res.MessageCount = 1, epoch, n
	return res, nil
}
