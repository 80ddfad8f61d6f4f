package badgerstore

import (
	"context"
	"crypto/rand"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon"
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

// DeleteThread implements daemon.GraphStore.
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

// CopyThread implements daemon.GraphStore. The source is read from one
// snapshot, so the copy is of one moment of it; the target is replaced.
func (s *Store) CopyThread(ctx context.Context, source, target string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer s.graphLock(target)()
	if _, err := s.deleteThread(target, true); err != nil {
		return 0, err
	}
	var copied int
	err := s.view(context.Background(), func(t *tx) error {
		h, err := threadHead(t, source)
		if err != nil || hidden(h) {
			return err
		}
		b := &batcher{s: s}
		owners := map[string][]byte{} // source chunk owner -> target's
		for _, kind := range []byte{kindGraphBlob, kindGraphWrite, kindGraphCheckpoint} {
			n, err := s.copyKind(t, b, kind, source, target, owners)
			if err != nil {
				return err
			}
			if kind == kindGraphCheckpoint {
				copied = n
			}
		}
		return b.flush()
	})
	if err != nil {
		return 0, err
	}
	return copied, s.update(func(t *tx) error {
		h, err := threadHead(t, target)
		if err != nil {
			return err
		}
		if h == nil {
			h = &storagev1.GraphThreadRecord{}
		}
		h.Copying = false
		h.UpdateTime = timestamppb.New(s.now())
		return put(t, graphThreadKey(target), h)
	})
}

// copyKind copies the source's records of one kind to the target, with the
// chunks of their values, and returns how many it copied.
func (s *Store) copyKind(t *tx, b *batcher, kind byte, source, target string, owners map[string][]byte) (int, error) {
	prefix := graphKey(kind, source)
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		val, err := it.Item().ValueCopy(nil)
		if err != nil {
			return n, err
		}
		rec := graphRecord(key)
		if err := decodeValue(key, val, rec); err != nil {
			return n, graphCorrupt(source, err)
		}
		var v *storagev1.GraphValueRecord
		switch r := rec.(type) {
		case *storagev1.GraphCheckpointRecord:
			v = r.Value
		case *storagev1.GraphBlobRecord:
			v = r.Value
		case *storagev1.GraphWriteRecord:
			v = r.Value
		}
		if v != nil && len(v.ChunkOwner) > 0 {
			owner, ok := owners[string(v.ChunkOwner)]
			if !ok {
				owner = make([]byte, 16)
				if _, err := rand.Read(owner); err != nil {
					return n, err
				}
				owners[string(v.ChunkOwner)] = owner
			}
			if err := copyChunks(t, b, source, target, v, owner); err != nil {
				return n, err
			}
			v.ChunkOwner = owner
		}
		newKey := append(graphKey(kind, target), key[len(prefix):]...)
		nv, err := encodeValue(newKey, rec)
		if err != nil {
			return n, err
		}
		if err := b.add(newKey, nv); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func copyChunks(t *tx, b *batcher, source, target string, v *storagev1.GraphValueRecord, owner []byte) error {
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphChunkScope(source, v.ChunkOwner, v.ChunkValue)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		val, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		var c storagev1.GraphChunkRecord
		if err := decodeValue(key, val, &c); err != nil {
			return graphCorrupt(source, err)
		}
		seq := key[len(key)-4:]
		newKey := append(graphChunkScope(target, owner, v.ChunkValue), seq...)
		nv, err := encodeValue(newKey, &c)
		if err != nil {
			return err
		}
		if err := b.add(newKey, nv); err != nil {
			return err
		}
	}
	return nil
}

// Prune implements daemon.GraphStore.
func (s *Store) Prune(ctx context.Context, threads []string, strategy daemon.PruneStrategy) (int, error) {
	total := 0
	for _, thread := range threads {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		var err error
		if strategy == daemon.PruneDelete {
			n, err = func() (int, error) {
				defer s.graphLock(thread)()
				return s.deleteThread(thread, false)
			}()
		} else {
			n, err = s.removeCheckpoints(thread, func(t *tx) (map[string]map[string]bool, error) {
				return allButLatest(t, thread), nil
			})
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// allButLatest returns, per namespace, the ids of every checkpoint but the
// latest.
func allButLatest(t *tx, thread string) map[string]map[string]bool {
	doomed := map[string]map[string]bool{}
	latest := map[string]string{}
	for _, c := range checkpointIDs(t, thread) {
		if doomed[c.ns] == nil {
			doomed[c.ns] = map[string]bool{}
		}
		doomed[c.ns][c.id] = true
		latest[c.ns] = max(latest[c.ns], c.id)
	}
	for ns, id := range latest {
		delete(doomed[ns], id)
	}
	return doomed
}

func checkpointIDs(t *tx, thread string) []graphCandidate {
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphKey(kindGraphCheckpoint, thread)})
	defer it.Close()
	var out []graphCandidate
	for it.Rewind(); it.Valid(); it.Next() {
		if _, parts, _, ok := splitGraphKey(it.Item().Key(), 2); ok && len(parts) == 2 {
			out = append(out, graphCandidate{thread, parts[0], parts[1]})
		}
	}
	return out
}

// DeleteForRuns implements daemon.GraphStore.
func (s *Store) DeleteForRuns(ctx context.Context, runIDs []string) (int, error) {
	runs := map[string]bool{}
	for _, r := range runIDs {
		runs[r] = true
	}
	matches := func(t *tx, prefix []byte) (map[string]map[string]map[string]bool, error) {
		out := map[string]map[string]map[string]bool{} // thread -> ns -> id
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			thread, parts, _, ok := splitGraphKey(key, 2)
			if !ok || len(parts) != 2 {
				continue
			}
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return nil, err
			}
			var rec storagev1.GraphCheckpointRecord
			if err := decodeValue(key, val, &rec); err != nil {
				return nil, graphCorrupt(thread, err)
			}
			if !runs[daemon.MetadataRunID(rec.MetadataJson)] {
				continue
			}
			if out[thread] == nil {
				out[thread] = map[string]map[string]bool{}
			}
			if out[thread][parts[0]] == nil {
				out[thread][parts[0]] = map[string]bool{}
			}
			out[thread][parts[0]][parts[1]] = true
		}
		return out, nil
	}
	var threads map[string]map[string]map[string]bool
	if err := s.view(ctx, func(t *tx) error {
		var err error
		threads, err = matches(t, []byte{kindGraphCheckpoint})
		return err
	}); err != nil {
		return 0, err
	}
	total := 0
	for thread := range threads {
		// Matched again under the thread's lock: the first scan is only
		// the list of threads to visit.
		n, err := s.removeCheckpoints(thread, func(t *tx) (map[string]map[string]bool, error) {
			m, err := matches(t, graphKey(kindGraphCheckpoint, thread))
			return m[thread], err
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// removeCheckpoints deletes the checkpoints pick returns (namespace -> ids)
// with their writes, and then the blobs of those namespaces that no
// remaining checkpoint references, in that order, so that a checkpoint a
// reader can still see always has its blobs. It returns how many
// checkpoints it removed.
func (s *Store) removeCheckpoints(thread string, pick func(t *tx) (map[string]map[string]bool, error)) (int, error) {
	defer s.graphLock(thread)()
	var keys, chunkScopes [][]byte
	var removed int
	err := s.view(context.Background(), func(t *tx) error {
		h, err := threadHead(t, thread)
		if err != nil || hidden(h) {
			return err
		}
		doomed, err := pick(t)
		if err != nil {
			return err
		}
		var writes, blobs [][]byte
		for ns, ids := range doomed {
			if len(ids) == 0 {
				continue
			}
			referenced := map[[2]string]bool{}
			for _, c := range checkpointIDs(t, thread) {
				if c.ns != ns {
					continue
				}
				var rec storagev1.GraphCheckpointRecord
				key := graphCheckpointKey(thread, ns, c.id)
				if _, err := graphGet(t, thread, key, &rec); err != nil {
					return err
				}
				if ids[c.id] {
					keys = append(keys, key)
					chunkScopes = appendChunkScope(chunkScopes, thread, rec.Value)
					writes = append(writes, keysWithPrefix(t.r, graphScope(kindGraphWrite, thread, ns, c.id))...)
					removed++
					continue
				}
				for ch, v := range rec.ChannelVersions {
					referenced[[2]string{ch, v}] = true
				}
			}
			it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphScope(kindGraphBlob, thread, ns), PrefetchValues: true})
			for it.Rewind(); it.Valid(); it.Next() {
				key := it.Item().KeyCopy(nil)
				_, parts, _, ok := splitGraphKey(key, 3)
				if !ok || len(parts) != 3 || referenced[[2]string{parts[1], parts[2]}] {
					continue
				}
				val, err := it.Item().ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				var b storagev1.GraphBlobRecord
				if err := decodeValue(key, val, &b); err == nil {
					chunkScopes = appendChunkScope(chunkScopes, thread, b.Value)
				}
				blobs = append(blobs, key)
			}
			it.Close()
		}
		keys = append(append(keys, writes...), blobs...)
		return nil
	})
	if err != nil {
		return 0, err
	}
	b := &batcher{s: s}
	for _, k := range keys {
		if err := b.add(k, nil); err != nil {
			return 0, err
		}
	}
	if err := b.flush(); err != nil {
		return 0, err
	}
	for _, p := range chunkScopes {
		if _, err := s.deletePrefix(p); err != nil {
			return 0, err
		}
	}
	return removed, nil
}

func appendChunkScope(scopes [][]byte, thread string, v *storagev1.GraphValueRecord) [][]byte {
	if v == nil || len(v.ChunkOwner) == 0 {
		return scopes
	}
	return append(scopes, graphChunkScope(thread, v.ChunkOwner, v.ChunkValue))
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
