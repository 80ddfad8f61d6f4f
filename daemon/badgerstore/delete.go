package badgerstore

import (
	"bytes"
	"context"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// DeleteSession implements core.Store: it writes the tombstone, at the
// epoch core.TombstoneEpoch decides, with a purge record in one commit, then
// deletes the session's records in batches (purge); Open finishes a purge a
// crash interrupted.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer s.lock(sessionID)()
	var tombEpoch uint64
	err := s.update(func(t *tx) error {
		var err error
		tombEpoch, err = core.TombstoneEpoch(&domainTxn{t: t}, sessionID, epoch, func() (uint64, error) {
			return savedEpoch(t, sessionID), nil
		})
		if err != nil {
			return err
		}
		if err := put(t, purgeKey(sessionID), &storagev1.PurgeRecord{Epoch: tombEpoch}); err != nil {
			return err
		}
		return put(t, sessionKey(sessionID), &storagev1.SessionRecord{
			Deleted: true, Epoch: tombEpoch, UpdateTime: timestamppb.New(s.now()),
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

// DefaultTombstoneRetention is how long a tombstone is kept after its delete
// finished, when Options.TombstoneRetention is zero.
const DefaultTombstoneRetention = 7 * 24 * time.Hour

// purge deletes a tombstoned session's records in batches, then removes its
// purge record and schedules its tombstone's expiry. Open resumes every
// purge left in the list of purge records. The caller holds the session's
// lock, so the session cannot be re-created meanwhile.
func (s *Store) purge(sessionID string) error {
	for _, kind := range []byte{kindRevision, kindMessage, kindLedgerEntry, kindRequest} {
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
		t.delete(purgeKey(sessionID))
		var rec storagev1.SessionRecord
		if _, err := get(t, nil, sessionID, sessionKey(sessionID), &rec); err != nil {
			return err
		}
		if !rec.Deleted {
			return nil // a live head: nothing to expire
		}
		return s.scheduleExpiry(t, sessionID, &rec)
	})
}

// scheduleExpiry marks tomb as purged now and lists it for removal once the
// retention has passed.
func (s *Store) scheduleExpiry(t *tx, sessionID string, tomb *storagev1.SessionRecord) error {
	now := s.now()
	tomb.DeleteTime = timestamppb.New(now)
	tomb.Purging = false //nolint:staticcheck // clearing format 3's mark
	if err := put(t, expiryKey(now.Add(s.retention), sessionID), &storagev1.ExpiryRecord{Epoch: tomb.Epoch}); err != nil {
		return err
	}
	return put(t, sessionKey(sessionID), tomb)
}

// finishPurges completes the deletes interrupted by a crash, as listed by
// their purge records: Open's cost is that of the unfinished deletes, not
// of the number of sessions.
func (s *Store) finishPurges() error {
	var pending []string
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindPurge}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if _, sid, _, err := decodeKey(it.Item().Key()); err == nil {
				pending = append(pending, sid)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, sid := range pending {
		s.log.Info("finishing an interrupted delete", "session_id", sid)
		unlock := s.lock(sid)
		err := s.purge(sid)
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// expireTombstones removes the tombstones whose retention ended by now, in
// expiry order, and returns how many it removed. Each removed tombstone's
// epoch first raises the epoch floor, in the same commit, so a writer of
// the deleted session stays fenced: a re-created session starts above the
// floor, and a create naming an epoch at or below it is refused.
func (s *Store) expireTombstones() (int, error) {
	type due struct {
		key   []byte
		sid   string
		epoch uint64
	}
	var list []due
	end := expiryKey(s.now(), "")
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindExpiry}})
		defer it.Close()
		for it.Rewind(); it.Valid() && bytes.Compare(it.Item().Key(), end) < 0; it.Next() {
			key := it.Item().KeyCopy(nil)
			_, sid, err := decodeExpiryKey(key)
			var rec storagev1.ExpiryRecord
			if err == nil && it.Item().Value(func(v []byte) error { return decodeValue(key, v, &rec) }) == nil {
				list = append(list, due{key, sid, rec.Epoch})
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, d := range list {
		select {
		case <-s.stop:
			return removed, nil // closing: the rest wait for the next start
		default:
		}
		unlock := s.lock(d.sid)
		err := s.update(func(t *tx) error {
			t.delete(d.key)
			_, tomb, err := head(t, d.sid)
			if err != nil || tomb == nil || tomb.Epoch != d.epoch {
				return err // re-created, gone, or deleted again (with its own entry): only this entry goes
			}
			if _, pending, err := t.get(purgeKey(d.sid)); err != nil || pending {
				return err // deleted again and not yet purged: that purge reschedules it
			}
			var floor storagev1.EpochFloorRecord
			if _, err := get(t, nil, "", epochFloorKey, &floor); err != nil {
				return err
			}
			floor.Epoch = max(floor.Epoch, tomb.Epoch)
			if err := put(t, epochFloorKey, &floor); err != nil {
				return err
			}
			t.delete(sessionKey(d.sid))
			removed++
			return nil
		})
		unlock()
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}
