package pgstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// RewindSession writes a copy of an old revision as the new latest, in the
// group commit under the session's row lock; the calls pending in it are
// made pending again, keeping their begin markers and effects.
func (s *Store) RewindSession(ctx context.Context, req *core.RewindRequest) (core.BranchResult, error) {
	var res core.BranchResult
	err := s.write(ctx, req.SessionID, func(ctx context.Context, q *query) error {
		var err error
		res, err = core.Rewind(&domainTxn{ctx: ctx, q: q, requestID: req.RequestID}, req, s.now())
		return err
	})
	return res, err
}

// forkSource is what a fork reads of its source, from one snapshot.
type forkSource struct {
	rec      *revisionRec
	messages []core.Message
	calls    map[string]*callRec // the calls pending in revisions up to rec
	pending  map[string]bool     // those pending in rec
	res      core.BranchResult
}

func (s *Store) readForkSource(ctx context.Context, sid string, revNum uint64) (*forkSource, error) {
	var src *forkSource
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		src = &forkSource{calls: map[string]*callRec{}, pending: map[string]bool{}}
		h, err := q.mustHead(ctx, sid, false)
		if err != nil {
			return err
		}
		if src.rec, err = q.revision(ctx, sid, h, revNum); err != nil {
			return err
		}
		for _, sg := range src.rec.Segments {
			for from := sg.FirstSeq; from < sg.FirstSeq+sg.Count; from += messagePage {
				_, err := q.messages(ctx, sid, h, src.rec.Revision, from, min(sg.FirstSeq+sg.Count, from+messagePage), func(m core.Message) bool {
					src.messages = append(src.messages, m)
					return true
				})
				if err != nil {
					return err
				}
			}
		}
		// The calls of the history: those pending in any kept revision up to
		// the one forked.
		inHistory := map[string]bool{}
		for _, u := range src.rec.Pending {
			inHistory[u.ID], src.pending[u.ID] = true, true
		}
		if err := q.eachRevision(ctx, sid, h, src.rec.Revision, func(old *revisionRec) {
			for _, u := range old.Pending {
				inHistory[u.ID] = true
			}
		}); err != nil {
			return err
		}
		err = q.eachCall(ctx, sid, h, "", func(id string, call *callRec) (bool, error) {
			if inHistory[id] {
				src.calls[id] = call
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		src.res.PerformedAfter, src.res.InDoubtAfter, err = q.afterRevision(ctx, sid, h, src.rec)
		return err
	})
	return src, err
}

// eachRevision calls fn with every kept revision of the session before the
// revision before, in order.
func (q *query) eachRevision(ctx context.Context, sessionID string, h *sessionRec, before uint64, fn func(*revisionRec)) error {
	rows, err := q.tx.Query(ctx, "SELECT revision, record, checksum FROM "+q.s.table("revisions")+
		" WHERE session_id = $1 AND revision < $2 ORDER BY revision", []byte(sessionID), int64(before))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rev, sum int64
		var rec []byte
		if err := rows.Scan(&rev, &rec, &sum); err != nil {
			return err
		}
		var r revisionRec
		if err := decode("revisions", revisionKey(sessionID, uint64(rev)).sum, rec, sum, &r); err != nil {
			return corrupt(h, sessionID, err)
		}
		fn(&r)
	}
	return rows.Err()
}

// ForkSession reads the source from one snapshot, then creates the new
// session in one transaction of the group commit, under the new session's
// row lock: the new session is never seen half copied.
func (s *Store) ForkSession(ctx context.Context, req *core.ForkRequest) (core.BranchResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BranchResult{}, err
	}
	nid := req.NewID
	fp := req.Fingerprint()
	src, err := s.readForkSource(ctx, req.SourceID, req.Revision)
	if err != nil {
		return core.BranchResult{}, err
	}
	var res core.BranchResult
	err = s.write(ctx, nid, func(ctx context.Context, q *query) error {
		res = src.res
		h, tomb, err := q.head(ctx, nid, true)
		if err != nil {
			return err
		}
		if h != nil {
			prev, retry, err := q.sessionRequest(ctx, h, nid, req.RequestID, fp)
			if err != nil {
				return err
			}
			if retry {
				res.Revision, res.Epoch, res.MessageCount = prev.Revision, prev.Epoch, prev.MessageCount
				return nil
			}
			return &core.StateError{Err: core.ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; fork into a new id, or delete it first", nid, h.Revision)}
		}
		epoch := uint64(1)
		if tomb != nil {
			epoch = tomb.Epoch + 1 // epochs never go backwards over a delete
		}
		now := nanos(s.now())
		n := uint64(len(src.messages))
		head := &sessionRec{
			Revision: 1, Epoch: epoch, NextSeq: n, CreateTime: now, UpdateTime: now,
			Task: src.rec.Task, Turn: src.rec.Turn, MessageCount: n, PendingCount: uint32(len(src.rec.Pending)),
			Labels: maps.Clone(src.rec.Labels),
		}
		if tomb == nil {
			// As a create by save: a concurrent creator waits on this row
			// and fails with a unique violation (runOne runs it again).
			if err := q.putHead(ctx, nid, head, true); err != nil {
				return err
			}
		}
		if err := q.putMessages(ctx, nid, 0, src.messages); err != nil {
			return err
		}
		for _, id := range slices.Sorted(maps.Keys(src.calls)) {
			c := *src.calls[id]
			c.LastPendingRevision = 0 // pending before the fork's first revision
			if src.pending[id] {
				c.LastPendingRevision = 1
			}
			if err := q.putCall(ctx, nid, id, &c); err != nil {
				return err
			}
		}
		rec := *src.rec
		rec.Revision, rec.Epoch, rec.SaveTime = 1, epoch, now
		rec.Segments = nil
		if n > 0 {
			rec.Segments = []segment{{FirstSeq: 0, Count: n}}
		}
		if err := q.put(ctx, revisionKey(nid, 1), &rec, false); err != nil {
			return err
		}
		if req.RequestID != "" {
			if err := q.put(ctx, requestKey(nid, req.RequestID), &requestRec{
				Fingerprint: fp, Revision: 1, MessageCount: n, Epoch: epoch,
			}, false); err != nil {
				return err
			}
		}
		res.Revision, res.Epoch, res.MessageCount = 1, epoch, n
		return q.putHead(ctx, nid, head, false)
	})
	if err != nil {
		return core.BranchResult{}, err
	}
	return res, nil
}
