package badgerstore

import (
	"context"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// Prune implements core.GraphStore.
func (s *Store) Prune(ctx context.Context, threads []string, strategy core.PruneStrategy) (int, error) {
	total := 0
	for _, thread := range threads {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		var err error
		if strategy == core.PruneDelete {
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

// DeleteForRuns implements core.GraphStore.
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
			if !runs[core.MetadataRunID(rec.MetadataJson)] {
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
					wk, scopes, err := writesOf(t, thread, ns, c.id)
					if err != nil {
						return err
					}
					writes, chunkScopes = append(writes, wk...), append(chunkScopes, scopes...)
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

// writesOf returns the keys of a checkpoint's pending writes and the chunk
// scopes of those written by an upload.
func writesOf(t *tx, thread, ns, id string) (keys, chunkScopes [][]byte, err error) {
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphScope(kindGraphWrite, thread, ns, id), PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		keys = append(keys, key)
		val, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, nil, err
		}
		var w storagev1.GraphWriteRecord
		if decodeValue(key, val, &w) == nil { // a damaged one is deleted all the same
			chunkScopes = appendChunkScope(chunkScopes, thread, w.Value)
		}
	}
	return keys, chunkScopes, nil
}

func appendChunkScope(scopes [][]byte, thread string, v *storagev1.GraphValueRecord) [][]byte {
	if v == nil || len(v.ChunkOwner) == 0 {
		return scopes
	}
	return append(scopes, graphChunkScope(thread, v.ChunkOwner, v.ChunkValue))
}
