package badgerstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// readValue returns a stored value; a chunked one is read from t's
// snapshot when its bytes are asked for.
func readValue(t *tx, thread string, r *storagev1.GraphValueRecord) core.GraphValue {
	if len(r.GetChunkOwner()) == 0 {
		return core.GraphValue{Type: r.GetType(), Size: int64(len(r.GetData())), Data: r.GetData()}
	}
	return core.ChunkedGraphValue(r.Type, r.Size, func(yield func([]byte) error) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphChunkScope(thread, r.ChunkOwner, r.ChunkValue)})
		defer it.Close()
		var n uint32
		var size int64
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			var c storagev1.GraphChunkRecord
			if err := decodeValue(key, val, &c); err != nil {
				return graphCorrupt(thread, err)
			}
			n++
			size += int64(len(c.Data))
			if err := yield(c.Data); err != nil {
				return err
			}
		}
		if n != r.ChunkCount || size != r.Size {
			return graphCorrupt(thread, fmt.Errorf("a value of %d bytes in %d chunks has %d bytes in %d chunks", r.Size, r.ChunkCount, size, n))
		}
		return nil
	})
}

// tuple reads the checkpoint rec stored under (thread, ns, id) with its
// blobs and writes.
func tuple(t *tx, thread, ns, id string, rec *storagev1.GraphCheckpointRecord) (*core.GraphTuple, error) {
	tp := &core.GraphTuple{Checkpoint: core.GraphCheckpoint{
		ThreadID: thread, NS: ns, ID: id, ParentID: rec.ParentCheckpointId,
		Value:           readValue(t, thread, rec.Value),
		ChannelVersions: rec.ChannelVersions,
		MetadataJSON:    rec.MetadataJson,
	}}
	channels := make([]string, 0, len(rec.ChannelVersions))
	for ch := range rec.ChannelVersions {
		channels = append(channels, ch)
	}
	sort.Strings(channels)
	for _, ch := range channels {
		var b storagev1.GraphBlobRecord
		found, err := graphGet(t, thread, graphBlobKey(thread, ns, ch, rec.ChannelVersions[ch]), &b)
		if err != nil {
			return nil, err
		}
		if found {
			tp.Blobs = append(tp.Blobs, core.GraphBlob{Channel: ch, Version: rec.ChannelVersions[ch], Value: readValue(t, thread, b.Value)})
		}
	}
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphScope(kindGraphWrite, thread, ns, id), PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		_, _, _, task, idx, ok := decodeGraphWriteKey(key)
		if !ok {
			return nil, graphCorrupt(thread, fmt.Errorf("malformed write key %x", key))
		}
		val, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		var w storagev1.GraphWriteRecord
		if err := decodeValue(key, val, &w); err != nil {
			return nil, graphCorrupt(thread, err)
		}
		tp.Writes = append(tp.Writes, core.GraphWrite{TaskID: task, TaskPath: w.TaskPath, Idx: idx, Channel: w.Channel, Value: readValue(t, thread, w.Value)})
	}
	core.SortGraphWrites(tp.Writes)
	return tp, nil
}

// GetCheckpoint implements core.GraphStore.
func (s *Store) GetCheckpoint(ctx context.Context, thread, ns, id string, fn func(*core.GraphTuple) error) (bool, error) {
	var found bool
	err := s.view(ctx, func(t *tx) error {
		h, err := threadHead(t, thread)
		if err != nil || hidden(h) {
			return err
		}
		if id == "" {
			if id, found = latestID(t, thread, ns); !found {
				return nil
			}
		}
		var rec storagev1.GraphCheckpointRecord
		if found, err = graphGet(t, thread, graphCheckpointKey(thread, ns, id), &rec); err != nil || !found {
			return err
		}
		tp, err := tuple(t, thread, ns, id, &rec)
		if err != nil {
			return err
		}
		return fn(tp)
	})
	return found, err
}

// latestID returns the greatest checkpoint id of (thread, ns).
func latestID(t *tx, thread, ns string) (string, bool) {
	prefix := graphScope(kindGraphCheckpoint, thread, ns)
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	it.Seek(append(slices.Clone(prefix), 0xff))
	if !it.Valid() {
		return "", false
	}
	return string(it.Item().Key()[len(prefix):]), true
}

type graphCandidate struct{ thread, ns, id string }

// ListCheckpoints implements core.GraphStore.
func (s *Store) ListCheckpoints(ctx context.Context, q core.GraphListQuery, fn func(*core.GraphTuple) error) error {
	return s.view(ctx, func(t *tx) error {
		prefix := []byte{kindGraphCheckpoint}
		switch {
		case q.ThreadID != "" && q.NS != nil:
			prefix = graphScope(kindGraphCheckpoint, q.ThreadID, *q.NS)
		case q.ThreadID != "":
			prefix = graphKey(kindGraphCheckpoint, q.ThreadID)
		}
		cands, err := listCandidates(ctx, t, prefix, q)
		if err != nil {
			return err
		}
		slices.SortFunc(cands, func(a, b graphCandidate) int {
			if a.id != b.id {
				return -strings.Compare(a.id, b.id)
			}
			if a.thread != b.thread {
				return strings.Compare(a.thread, b.thread)
			}
			return strings.Compare(a.ns, b.ns)
		})
		if q.Limit > 0 && len(cands) > q.Limit {
			cands = cands[:q.Limit]
		}
		for _, c := range cands {
			var rec storagev1.GraphCheckpointRecord
			found, err := graphGet(t, c.thread, graphCheckpointKey(c.thread, c.ns, c.id), &rec)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			tp, err := tuple(t, c.thread, c.ns, c.id, &rec)
			if err != nil {
				return err
			}
			if err := fn(tp); err != nil {
				return err
			}
		}
		return nil
	})
}

// listCandidates returns the checkpoints under prefix that q's bound and
// filter keep, in threads readers may see.
func listCandidates(ctx context.Context, t *tx, prefix []byte, q core.GraphListQuery) ([]graphCandidate, error) {
	hiddenThreads := map[string]bool{}
	var cands []graphCandidate
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: len(q.Filter) > 0})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := it.Item().KeyCopy(nil)
		thread, parts, _, ok := splitGraphKey(key, 2)
		if !ok || len(parts) != 2 {
			return nil, graphCorrupt(thread, fmt.Errorf("malformed checkpoint key %x", key))
		}
		if (q.Before != "" && parts[1] >= q.Before) || (q.NS != nil && parts[0] != *q.NS) {
			continue
		}
		hide, seen := hiddenThreads[thread]
		if !seen {
			h, err := threadHead(t, thread)
			if err != nil {
				return nil, err
			}
			hide = hidden(h)
			hiddenThreads[thread] = hide
		}
		if hide {
			continue
		}
		if len(q.Filter) > 0 {
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return nil, err
			}
			var rec storagev1.GraphCheckpointRecord
			if err := decodeValue(key, val, &rec); err != nil {
				return nil, graphCorrupt(thread, err)
			}
			if !core.MetadataMatches(rec.MetadataJson, q.Filter) {
				continue
			}
		}
		cands = append(cands, graphCandidate{thread, parts[0], parts[1]})
	}
	return cands, nil
}
