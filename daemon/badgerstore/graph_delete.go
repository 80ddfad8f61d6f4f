package badgerstore

import (
	"context"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// A thread too big for one transaction is deleted or copied as the sessions'
// purge deletes a session: one commit writes the tombstone (a head marked
// purging, or copying for a copy's target), which makes readers see the
// thread as empty; batches of at most purgeBatch keys or graphBatchBytes
// follow, each its own durable commit; a last commit clears the mark. The
// thread's lock is held throughout, so no write to it interleaves, and Open
// finishes a delete (or undoes a copy) that a crash interrupted.

// batcher commits writes through the engine in batches.
type batcher struct {
	s    *Store
	ws   []write
	size int
}

func (b *batcher) add(key, val []byte) error {
	b.ws = append(b.ws, write{key: key, val: val})
	b.size += len(key) + len(val) + entryOverhead
	if b.size >= graphBatchBytes || len(b.ws) >= purgeBatch {
		return b.flush()
	}
	return nil
}

func (b *batcher) flush() error {
	if len(b.ws) == 0 {
		return nil
	}
	err := b.s.eng.commit(b.ws)
	b.ws, b.size = nil, 0
	return err
}

// deletePrefix deletes every key under prefix in batches and returns how
// many it deleted.
func (s *Store) deletePrefix(prefix []byte) (int, error) {
	total := 0
	for {
		n := 0
		err := s.update(func(t *tx) error {
			it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Rewind(); it.Valid() && n < purgeBatch; it.Next() {
				t.delete(it.Item().KeyCopy(nil))
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// DeleteThread implements core.GraphStore.
func (s *Store) DeleteThread(ctx context.Context, thread string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.graphLock(thread)()
	_, err := s.deleteThread(thread, false)
	return err
}

// deleteThread tombstones and purges the thread (the caller holds its
// lock), leaving it marked copying when copying is set, and returns how many
// checkpoints it removed.
func (s *Store) deleteThread(thread string, copying bool) (int, error) {
	err := s.update(func(t *tx) error {
		h, err := threadHead(t, thread)
		if err != nil {
			return err
		}
		through, has := greatestID(t, thread)
		if h == nil && !has && !copying {
			return nil // nothing to delete, nothing to remember
		}
		n := &storagev1.GraphThreadRecord{UpdateTime: timestamppb.New(s.now()), Purging: !copying, Copying: copying}
		if h != nil {
			n.Deleted, n.DeletedThrough = h.Deleted, h.DeletedThrough
		}
		if has {
			n.Deleted = true
			n.DeletedThrough = max(n.DeletedThrough, through)
		}
		return put(t, graphThreadKey(thread), n)
	})
	if err != nil {
		return 0, err
	}
	return s.purgeThread(thread)
}

// greatestID returns the greatest checkpoint id the thread's checkpoints
// and writes name; has is false when it has neither.
func greatestID(t *tx, thread string) (top string, has bool) {
	for _, kind := range []byte{kindGraphCheckpoint, kindGraphWrite} {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphKey(kind, thread)})
		for it.Rewind(); it.Valid(); it.Next() {
			if _, parts, _, ok := splitGraphKey(it.Item().Key(), 2); ok && len(parts) == 2 {
				top, has = max(top, parts[1]), true
			}
		}
		it.Close()
	}
	return top, has
}

// purgeThread deletes the thread's records in batches and clears the
// purging mark; a copying mark is left for the copy to clear. It returns how
// many checkpoints it removed.
func (s *Store) purgeThread(thread string) (int, error) {
	var checkpoints int
	for _, kind := range graphDataKinds {
		n, err := s.deletePrefix(graphKey(kind, thread))
		if err != nil {
			return checkpoints, err
		}
		if kind == kindGraphCheckpoint {
			checkpoints = n
		}
	}
	return checkpoints, s.update(func(t *tx) error {
		h, err := threadHead(t, thread)
		if err != nil || h == nil || !h.Purging {
			return err
		}
		h.Purging = false
		return put(t, graphThreadKey(thread), h)
	})
}

// finishGraph, at Open, completes the deletes a crash interrupted, removes
// what an interrupted copy wrote, and removes every upload's staged chunks.
func (s *Store) finishGraph() error {
	type pending struct {
		thread  string
		copying bool
	}
	var threads []pending
	var uploads [][2]string
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindGraphThread}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			var h storagev1.GraphThreadRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) != nil || !hidden(&h) {
				continue // a damaged head is left for Verify to report
			}
			thread, _, _, _ := splitGraphKey(key, 0)
			threads = append(threads, pending{thread, h.Copying})
		}
		up := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindGraphUpload}})
		defer up.Close()
		for up.Rewind(); up.Valid(); up.Next() {
			key := up.Item().KeyCopy(nil)
			thread, _, rest, ok := splitGraphKey(key, 0)
			if ok && len(rest) == 16 {
				uploads = append(uploads, [2]string{thread, string(rest)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range threads {
		s.log.Info("finishing an interrupted graph thread delete or copy", "thread_id", p.thread, "copy", p.copying)
		if _, err := s.purgeThread(p.thread); err != nil {
			return err
		}
		if p.copying {
			err := s.update(func(t *tx) error {
				h, err := threadHead(t, p.thread)
				if err != nil || h == nil {
					return err
				}
				h.Copying, h.Deleted = false, h.Deleted || h.DeletedThrough != ""
				return put(t, graphThreadKey(p.thread), h)
			})
			if err != nil {
				return err
			}
		}
	}
	for _, u := range uploads {
		s.log.Info("removing the staged chunks of an upload that did not finish", "thread_id", u[0])
		if err := s.dropUpload(u[0], []byte(u[1])); err != nil {
			return err
		}
	}
	return nil
}
