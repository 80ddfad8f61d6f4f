package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

var _ daemon.GraphStore = (*Store)(nil)

// graphState is the graph API's share of a Store: its locks. A thread's
// lock is held exclusively by what reads and rewrites shared records (a
// put's checkpoint and blobs, a delete, a copy, a prune) and shared by what
// writes only its own keys: a PutWrites (which also holds its task's lock,
// so that an insert-or-ignore reads what it decides on) and an upload's
// staging. Parallel tasks of one thread thus share a group commit, and no
// write interleaves with a thread's delete.
type graphState struct {
	threads [64]sync.RWMutex
	tasks   [64]sync.Mutex
}

func stripe(parts ...string) int {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int(h.Sum32() % 64)
}

// graphLock locks the thread exclusively.
func (s *Store) graphLock(thread string) func() {
	m := &s.graph.threads[stripe(thread)]
	m.Lock()
	return m.Unlock
}

// graphShare locks the thread shared and, when task is set, the task's
// stripe exclusively.
func (s *Store) graphShare(thread, task string) func() {
	m := &s.graph.threads[stripe(thread)]
	m.RLock()
	if task == "" {
		return m.RUnlock
	}
	tm := &s.graph.tasks[stripe(thread, task)]
	tm.Lock()
	return func() {
		tm.Unlock()
		m.RUnlock()
	}
}

// graphGet reads key into m; a value that fails its checksum or does not
// decode is daemon.ErrCorrupt.
func graphGet(t *tx, thread string, key []byte, m proto.Message) (found bool, err error) {
	v, found, err := t.get(key)
	if err != nil || !found {
		return false, err
	}
	if err := decodeValue(key, v, m); err != nil {
		return false, graphCorrupt(thread, err)
	}
	return true, nil
}

func graphCorrupt(thread string, err error) error {
	return fmt.Errorf("%w: graph thread %q: stored data cannot be decoded (%v) and can no longer be trusted; delete the thread with DeleteThread",
		daemon.ErrCorrupt, thread, err)
}

// threadHead returns the thread's head, nil when it has none.
func threadHead(t *tx, thread string) (*storagev1.GraphThreadRecord, error) {
	var h storagev1.GraphThreadRecord
	found, err := graphGet(t, thread, graphThreadKey(thread), &h)
	if err != nil || !found {
		return nil, err
	}
	return &h, nil
}

// hidden reports whether readers see the thread as empty: a delete or a
// copy into it has not finished.
func hidden(h *storagev1.GraphThreadRecord) bool { return h != nil && (h.Purging || h.Copying) }

// touchThread records a write to the thread, keeping its tombstone fields
// for the late-write rule.
func (s *Store) touchThread(t *tx, thread string, h *storagev1.GraphThreadRecord) error {
	n := &storagev1.GraphThreadRecord{UpdateTime: timestamppb.New(s.now())}
	if h != nil {
		n.Deleted, n.DeletedThrough = h.Deleted, h.DeletedThrough
	}
	return put(t, graphThreadKey(thread), n)
}

// checkRequest looks up a request id: already is true when it was applied
// with the same fingerprint.
func checkRequest(t *tx, thread, requestID string, fp []byte) (already bool, err error) {
	if requestID == "" {
		return false, nil
	}
	var r storagev1.GraphRequestRecord
	found, err := graphGet(t, thread, graphRequestKey(thread, requestID), &r)
	if err != nil || !found {
		return false, err
	}
	if !bytes.Equal(r.Fingerprint, fp) {
		return false, fmt.Errorf("%w: request id %s was already used for a different write to thread %q; make a new id for a new write",
			daemon.ErrRequestIDReused, requestID, thread)
	}
	return true, nil
}

func putRequest(t *tx, thread, requestID string, fp []byte) error {
	if requestID == "" {
		return nil
	}
	return put(t, graphRequestKey(thread, requestID), &storagev1.GraphRequestRecord{Fingerprint: fp})
}

func inlineValue(v daemon.GraphValue) *storagev1.GraphValueRecord {
	return &storagev1.GraphValueRecord{Type: v.Type, Data: v.Data, Size: int64(len(v.Data))}
}

// deleteChunks deletes the chunks of a stored value, if it has any.
func deleteChunks(t *tx, thread string, v *storagev1.GraphValueRecord) {
	if v == nil || len(v.ChunkOwner) == 0 {
		return
	}
	for _, k := range keysWithPrefix(t.r, graphChunkScope(thread, v.ChunkOwner, v.ChunkValue)) {
		t.delete(k)
	}
}

func keysWithPrefix(r *badger.Txn, prefix []byte) [][]byte { return keysWithPrefixLimit(r, prefix, -1) }

// keysWithPrefixLimit returns up to limit keys under prefix; a negative
// limit returns them all.
func keysWithPrefixLimit(r *badger.Txn, prefix []byte, limit int) [][]byte {
	it := r.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var keys [][]byte
	for it.Rewind(); it.Valid() && (limit < 0 || len(keys) < limit); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	return keys
}

// PutCheckpoint implements daemon.GraphStore.
func (s *Store) PutCheckpoint(ctx context.Context, p *daemon.GraphPut) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c := p.Checkpoint
	defer s.graphLock(c.ThreadID)()
	var fp []byte
	if p.RequestID != "" {
		fp = p.Fingerprint().Sum(nil)
	}
	var already bool
	err := s.update(func(t *tx) error {
		var err error
		if already, err = checkRequest(t, c.ThreadID, p.RequestID, fp); err != nil || already {
			return err
		}
		blobs := make([]*storagev1.GraphValueRecord, len(p.Blobs))
		for i, b := range p.Blobs {
			blobs[i] = inlineValue(b.Value)
		}
		if err := s.putCheckpoint(t, c, inlineValue(c.Value), p.Blobs, blobs); err != nil {
			return err
		}
		return putRequest(t, c.ThreadID, p.RequestID, fp)
	})
	return already, err
}

// putCheckpoint writes the checkpoint record with value, replacing a stored
// one (and its chunks), and each blob not stored yet with its value record;
// it returns nothing about blobs kept, whose records the caller may discard.
func (s *Store) putCheckpoint(t *tx, c daemon.GraphCheckpoint, value *storagev1.GraphValueRecord, blobs []daemon.GraphBlob, values []*storagev1.GraphValueRecord) error {
	h, err := threadHead(t, c.ThreadID)
	if err != nil {
		return err
	}
	key := graphCheckpointKey(c.ThreadID, c.NS, c.ID)
	var old storagev1.GraphCheckpointRecord
	found, err := graphGet(t, c.ThreadID, key, &old)
	if err != nil {
		return err
	}
	if found {
		deleteChunks(t, c.ThreadID, old.Value)
	}
	rec := &storagev1.GraphCheckpointRecord{
		ParentCheckpointId: c.ParentID,
		Value:              value,
		ChannelVersions:    c.ChannelVersions,
		MetadataJson:       c.MetadataJSON,
		PutTime:            timestamppb.New(s.now()),
	}
	if err := put(t, key, rec); err != nil {
		return err
	}
	for i, b := range blobs {
		bk := graphBlobKey(c.ThreadID, c.NS, b.Channel, b.Version)
		_, exists, err := t.get(bk)
		if err != nil {
			return err
		}
		if exists {
			deleteChunks(t, c.ThreadID, values[i]) // staged by an upload, not needed
			continue
		}
		if err := put(t, bk, &storagev1.GraphBlobRecord{Value: values[i]}); err != nil {
			return err
		}
	}
	return s.touchThread(t, c.ThreadID, h)
}

// PutWrites implements daemon.GraphStore. The late-write rule: once a
// thread has been deleted, a write for a checkpoint id not above the
// greatest id the thread held then is dropped unless that checkpoint has
// been stored again.
func (s *Store) PutWrites(ctx context.Context, w *daemon.GraphWrites) (daemon.GraphWritesResult, error) {
	if err := ctx.Err(); err != nil {
		return daemon.GraphWritesResult{}, err
	}
	defer s.graphShare(w.ThreadID, w.TaskID)()
	var fp []byte
	if w.RequestID != "" {
		fp = w.Fingerprint()
	}
	var res daemon.GraphWritesResult
	err := s.update(func(t *tx) error {
		already, err := checkRequest(t, w.ThreadID, w.RequestID, fp)
		if err != nil || already {
			res.AlreadyApplied = already
			return err
		}
		h, err := threadHead(t, w.ThreadID)
		if err != nil {
			return err
		}
		if h != nil && h.Deleted && w.CheckpointID <= h.DeletedThrough {
			_, exists, err := t.get(graphCheckpointKey(w.ThreadID, w.NS, w.CheckpointID))
			if err != nil {
				return err
			}
			if !exists {
				res.DroppedLate = true
				return nil
			}
		}
		upsert := w.IsUpsert()
		for _, x := range w.Writes {
			key := graphWriteKey(w.ThreadID, w.NS, w.CheckpointID, w.TaskID, x.Idx)
			if !upsert {
				_, exists, err := t.get(key)
				if err != nil {
					return err
				}
				if exists {
					continue
				}
			}
			if err := put(t, key, &storagev1.GraphWriteRecord{TaskPath: w.TaskPath, Channel: x.Channel, Value: inlineValue(x.Value)}); err != nil {
				return err
			}
			res.Written++
		}
		if err := s.touchThread(t, w.ThreadID, h); err != nil {
			return err
		}
		return putRequest(t, w.ThreadID, w.RequestID, fp)
	})
	if err != nil {
		return daemon.GraphWritesResult{}, err
	}
	return res, nil
}

// readValue returns a stored value; a chunked one is read from t's
// snapshot when its bytes are asked for.
func readValue(t *tx, thread string, r *storagev1.GraphValueRecord) daemon.GraphValue {
	if len(r.GetChunkOwner()) == 0 {
		return daemon.GraphValue{Type: r.GetType(), Size: int64(len(r.GetData())), Data: r.GetData()}
	}
	return daemon.ChunkedGraphValue(r.Type, r.Size, func(yield func([]byte) error) error {
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
func tuple(t *tx, thread, ns, id string, rec *storagev1.GraphCheckpointRecord) (*daemon.GraphTuple, error) {
	tp := &daemon.GraphTuple{Checkpoint: daemon.GraphCheckpoint{
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
			tp.Blobs = append(tp.Blobs, daemon.GraphBlob{Channel: ch, Version: rec.ChannelVersions[ch], Value: readValue(t, thread, b.Value)})
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
		tp.Writes = append(tp.Writes, daemon.GraphWrite{TaskID: task, TaskPath: w.TaskPath, Idx: idx, Channel: w.Channel, Value: readValue(t, thread, w.Value)})
	}
	daemon.SortGraphWrites(tp.Writes)
	return tp, nil
}

// GetCheckpoint implements daemon.GraphStore.
func (s *Store) GetCheckpoint(ctx context.Context, thread, ns, id string, fn func(*daemon.GraphTuple) error) (bool, error) {
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

// ListCheckpoints implements daemon.GraphStore.
func (s *Store) ListCheckpoints(ctx context.Context, q daemon.GraphListQuery, fn func(*daemon.GraphTuple) error) error {
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
				return -cmp(a.id, b.id)
			}
			if a.thread != b.thread {
				return cmp(a.thread, b.thread)
			}
			return cmp(a.ns, b.ns)
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
func listCandidates(ctx context.Context, t *tx, prefix []byte, q daemon.GraphListQuery) ([]graphCandidate, error) {
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
			if !daemon.MetadataMatches(rec.MetadataJson, q.Filter) {
				continue
			}
		}
		cands = append(cands, graphCandidate{thread, parts[0], parts[1]})
	}
	return cands, nil
}

func cmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
