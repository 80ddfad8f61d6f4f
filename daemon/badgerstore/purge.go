package badgerstore

import (
	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

func (s *Store) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer s.lock(sessionID)()
	var tombEpoch uint64
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		switch {
		case errors.Is(err, daemon.ErrCorrupt):
			// A session whose head cannot be decoded can still be deleted.
			// Its epoch is unknown: the tombstone takes the highest epoch
			// any readable revision was saved under, or the caller's.
			tombEpoch = max(epoch, savedEpoch(t, sessionID))
		case err != nil:
			return err
		default:
			if err := fence(h, sessionID, epoch); err != nil {
				return err
			}
			tombEpoch = h.Epoch
		}
		return put(t, sessionKey(sessionID), &storagev1.SessionRecord{
			Deleted: true, Purging: true, Epoch: tombEpoch, UpdateTime: timestamppb.New(s.now()),
		})
	})
	if err != nil {
		return 0, err
	}
	return tombEpoch, s.purge(sessionID)
}

// savedEpoch returns the highest epoch among the session's readable
// revisions.
func savedEpoch(t *tx, sessionID string) uint64 {
	var top uint64
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: sessionScope(kindRevision, sessionID)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var rec storagev1.RevisionRecord
		key := it.Item().KeyCopy(nil)
		if v, err := it.Item().ValueCopy(nil); err == nil && decodeValue(key, v, &rec) == nil {
			top = max(top, rec.Epoch)
		}
	}
	return top
}

// purgeBatch bounds the keys deleted per transaction, well under Badger's
// transaction limit.
const purgeBatch = 1000

// purge deletes a tombstoned session's records in batches, then clears the
// tombstone's purging mark. It is restarted at Open if interrupted.
func (s *Store) purge(sessionID string) error {
	for _, kind := range []byte{kindRevision, kindMessage, kindCall, kindRequest} {
		prefix := sessionScope(kind, sessionID)
		for more := true; more; {
			err := s.update(func(t *tx) error {
				it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
				defer it.Close()
				n := 0
				for it.Rewind(); it.Valid() && n < purgeBatch; it.Next() {
					t.delete(it.Item().KeyCopy(nil))
					n++
				}
				more = n > 0
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return s.update(func(t *tx) error {
		var rec storagev1.SessionRecord
		if _, err := get(t, nil, sessionID, sessionKey(sessionID), &rec); err != nil {
			return err
		}
		if !rec.Deleted {
			return nil // re-created meanwhile; nothing to clear
		}
		rec.Purging = false
		return put(t, sessionKey(sessionID), &rec)
	})
}

// sessionsWhere returns the ids of the sessions whose head (or tombstone)
// satisfies pred; a head that does not decode is left for Verify to report.
func (s *Store) sessionsWhere(pred func(*storagev1.SessionRecord) bool) ([]string, error) {
	var sids []string
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			var h storagev1.SessionRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) != nil || !pred(&h) {
				continue
			}
			_, sid, _, _ := decodeKey(key)
			sids = append(sids, sid)
		}
		return nil
	})
	return sids, err
}

// finishPurges completes deletes interrupted by a crash.
func (s *Store) finishPurges() error {
	pending, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool { return h.Purging })
	if err != nil {
		return err
	}
	for _, sid := range pending {
		s.log.Info("finishing an interrupted delete", "session_id", sid)
		if err := s.purge(sid); err != nil {
			return err
		}
	}
	return nil
}
