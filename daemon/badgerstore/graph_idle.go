package badgerstore

import (
	"context"
	"time"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// DeleteIdleThreads implements core.GraphStore. A thread's head records
// its last write (a put, writes, a copy into it); a thread idle since before
// cutoff is deleted behind a tombstone like any other, and a tombstone
// older than cutoff is removed: by then no late write of the deleted run
// is still on its way.
func (s *Store) DeleteIdleThreads(ctx context.Context, cutoff time.Time) (int, error) {
	var idle []string
	err := s.view(ctx, func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindGraphThread}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			var h storagev1.GraphThreadRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) != nil || hidden(&h) {
				continue
			}
			if h.UpdateTime.AsTime().Before(cutoff) {
				thread, _, _, _ := splitGraphKey(key, 0)
				idle = append(idle, thread)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, thread := range idle {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		n, err := s.deleteIdle(thread, cutoff)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// deleteIdle deletes the thread, or its bare tombstone, if it is still idle
// since before cutoff under its lock; it returns 1 for a deleted thread.
func (s *Store) deleteIdle(thread string, cutoff time.Time) (int, error) {
	defer s.graphLock(thread)()
	var stillIdle, empty bool
	err := s.view(context.Background(), func(t *tx) error {
		h, err := threadHead(t, thread)
		if err != nil || h == nil || hidden(h) {
			return err
		}
		stillIdle = h.UpdateTime.AsTime().Before(cutoff)
		for _, kind := range graphDataKinds {
			if len(keysWithPrefixLimit(t.r, graphKey(kind, thread), 1)) > 0 {
				return nil
			}
		}
		empty = true
		return nil
	})
	switch {
	case err != nil || !stillIdle:
		return 0, err
	case empty:
		return 0, s.update(func(t *tx) error {
			t.delete(graphThreadKey(thread))
			return nil
		})
	}
	_, err = s.deleteThread(thread, false)
	return 1, err
}
