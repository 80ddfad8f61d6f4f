package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// head returns the session's record, or nil when it does not exist or is a
// tombstone; tomb returns the tombstone.
func head(t *tx, sessionID string) (live, tomb *storagev1.SessionRecord, err error) {
	var rec storagev1.SessionRecord
	found, err := get(t, nil, sessionID, sessionKey(sessionID), &rec)
	if err != nil || !found {
		return nil, nil, err
	}
	if rec.Deleted {
		return nil, &rec, nil
	}
	return &rec, nil, nil
}

func mustHead(t *tx, sessionID string) (*storagev1.SessionRecord, error) {
	h, _, err := head(t, sessionID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, core.NotFound(sessionID)
	}
	return h, nil
}

func (s *Store) Checkpoint(ctx context.Context, sessionID string, revision uint64) (core.Checkpoint, error) {
	var cp core.Checkpoint
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		cp, err = checkpoint(t, sessionID, h, revision)
		return err
	})
	return cp, err
}

func revision(t *tx, sessionID string, h *storagev1.SessionRecord, rev uint64) (*storagev1.RevisionRecord, error) {
	if rev == 0 {
		rev = h.Revision
	}
	if rev > h.Revision {
		return nil, &core.StateError{Err: core.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q has no revision %d; its latest is %d", sessionID, rev, h.Revision)}
	}
	var rec storagev1.RevisionRecord
	found, err := get(t, h, sessionID, revisionKey(sessionID, rev), &rec)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &core.StateError{Err: core.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q no longer keeps revision %d", sessionID, rev)}
	}
	return &rec, nil
}

func checkpoint(t *tx, sessionID string, h *storagev1.SessionRecord, rev uint64) (core.Checkpoint, error) {
	rec, err := revision(t, sessionID, h, rev)
	if err != nil {
		return core.Checkpoint{}, err
	}
	hr, r := headFromRecord(h), revisionFromRecord(rec)
	return core.CheckpointOf(sessionID, &hr, &r), nil
}

func (s *Store) Messages(ctx context.Context, sessionID string, rev, start uint64, maxBytes, maxCount int) ([]core.Message, error) {
	var page core.MessagePage
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		rec, err := revision(t, sessionID, h, rev)
		if err != nil {
			return err
		}
		page = core.MessagePage{MaxBytes: maxBytes, MaxCount: maxCount} // afresh if fn runs again
		for first, end := range core.SeqRanges(segmentsFromRecord(rec.Segments), start) {
			for seq := first; seq < end; seq++ {
				var m storagev1.Message
				found, err := get(t, h, sessionID, messageKey(sessionID, seq), &m)
				if err != nil {
					return err
				}
				if !found {
					return corrupt(h, sessionID, fmt.Errorf("message %d of revision %d is missing", seq, rec.Revision))
				}
				if !page.Add(core.Message{Role: m.Role, ContentJSON: m.ContentJson}) {
					return nil
				}
			}
		}
		return nil
	})
	return page.Messages, err
}

func (s *Store) PendingToolUses(ctx context.Context, sessionID string) (uint64, []core.PendingToolUse, error) {
	var rev uint64
	var calls []core.PendingToolUse
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		hr := headFromRecord(h)
		rev, calls, err = core.PendingToolUses(&domainTxn{t: t, rec: h}, sessionID, &hr)
		return err
	})
	return rev, calls, err
}

func (s *Store) ListSessions(ctx context.Context, after string, limit int, filter core.SessionFilter) ([]core.SessionSummary, error) {
	var out []core.SessionSummary
	err := s.view(ctx, func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		seek := []byte{kindSession}
		if after != "" {
			seek = sessionKey(after)
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			_, sid, _, err := decodeKey(key)
			if err != nil || sid == after {
				continue
			}
			var h storagev1.SessionRecord
			if err := item.Value(func(v []byte) error { return decodeValue(key, v, &h) }); err != nil {
				// A damaged head is listed so an operator can find and delete it.
				out = append(out, core.SessionSummary{SessionID: sid})
				continue
			}
			if ss, ok, err := listed(t, sid, &h, filter); err != nil {
				return err
			} else if ok {
				out = append(out, ss)
			}
		}
		return nil
	})
	return out, err
}

// listed returns the summary of the session whose head is h when ListSessions
// lists it: live, and passing filter.
func listed(t *tx, sid string, h *storagev1.SessionRecord, filter core.SessionFilter) (core.SessionSummary, bool, error) {
	if h.Deleted {
		return core.SessionSummary{}, false, nil
	}
	hr := headFromRecord(h)
	if !filter.Selects(&hr) {
		return core.SessionSummary{}, false, nil
	}
	inDoubt, err := core.InDoubt(&domainTxn{t: t, rec: h}, sid, &hr)
	if err != nil {
		return core.SessionSummary{}, false, err
	}
	return core.SummaryOf(sid, &hr, inDoubt), true, nil
}

func (s *Store) Summary(ctx context.Context, sessionID string) (core.SessionSummary, error) {
	var out core.SessionSummary
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if errors.Is(err, core.ErrCheckpointCorrupt) {
			out = core.SessionSummary{SessionID: sessionID} // as ListSessions lists it
			return nil
		}
		if err != nil {
			return err
		}
		hr := headFromRecord(h)
		inDoubt, err := core.InDoubt(&domainTxn{t: t, rec: h}, sessionID, &hr)
		if err != nil {
			return err
		}
		out = core.SummaryOf(sessionID, &hr, inDoubt)
		return nil
	})
	return out, err
}

func (s *Store) LedgerToolUses(ctx context.Context, sessionID string, ids []string) (uint64, []core.PendingToolUse, error) {
	var rev uint64
	var calls []core.PendingToolUse
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		hr := headFromRecord(h)
		rev, calls, err = core.LedgerToolUses(&domainTxn{t: t, rec: h}, sessionID, &hr, ids)
		return err
	})
	return rev, calls, err
}
