package pgstore

import (
	"context"

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

// readForkSource reads what a fork of the session's revision revNum copies,
// from one snapshot.
func (s *Store) readForkSource(ctx context.Context, sid string, revNum uint64) (*core.ForkSource, error) {
	var src *core.ForkSource
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sid, false)
		if err != nil {
			return err
		}
		rec, err := q.revision(ctx, sid, h, revNum)
		if err != nil {
			return err
		}
		r := revisionOf(rec)
		src = &core.ForkSource{Revision: &r, Messages: []core.Message{}}
		for _, sg := range rec.Segments {
			for from := sg.FirstSeq; from < sg.FirstSeq+sg.Count; from += messagePage {
				_, err := q.messages(ctx, sid, h, rec.Revision, from, min(sg.FirstSeq+sg.Count, from+messagePage), func(m core.Message) bool {
					src.Messages = append(src.Messages, m)
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
		for _, u := range rec.Pending {
			inHistory[u.ID] = true
		}
		if err := q.eachRevision(ctx, sid, h, rec.Revision, func(old *revisionRec) {
			for _, u := range old.Pending {
				inHistory[u.ID] = true
			}
		}); err != nil {
			return err
		}
		err = q.eachLedgerEntry(ctx, sid, h, "", func(id string, call *ledgerEntryRec) (bool, error) {
			if inHistory[id] {
				src.Ledger = append(src.Ledger, ledgerEntry(id, call))
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		src.PerformedAfter, src.InDoubtAfter, err = q.afterRevision(ctx, sid, h, rec)
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
	src, err := s.readForkSource(ctx, req.SourceID, req.Revision)
	if err != nil {
		return core.BranchResult{}, err
	}
	var res core.BranchResult
	err = s.write(ctx, req.NewID, func(ctx context.Context, q *query) error {
		t := &domainTxn{ctx: ctx, q: q, requestID: req.RequestID}
		epoch, prev, err := core.ForkTarget(t, req)
		if err != nil {
			return err
		}
		if prev != nil {
			res = core.ForkRetried(src, prev)
			return nil
		}
		res, err = core.ForkWrite(t, req, src, epoch, s.now())
		return err
	})
	if err != nil {
		return core.BranchResult{}, err
	}
	return res, nil
}
