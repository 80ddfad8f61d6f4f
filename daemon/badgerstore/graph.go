package badgerstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

var _ core.GraphStore = (*Store)(nil)

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
// decode is core.ErrCheckpointCorrupt.
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
		core.ErrCheckpointCorrupt, thread, err)
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
	if err != nil {
		return false, err
	}
	return core.GraphReplay(thread, requestID, r.Fingerprint, found, fp)
}

func putRequest(t *tx, thread, requestID string, fp []byte) error {
	if requestID == "" {
		return nil
	}
	return put(t, graphRequestKey(thread, requestID), &storagev1.GraphRequestRecord{Fingerprint: fp})
}

func inlineValue(v core.GraphValue) *storagev1.GraphValueRecord {
	return &storagev1.GraphValueRecord{Type: v.Type, Data: v.Data, Size: int64(len(v.Data))}
}

// putWrites stages w's writes in t as PutWrites stores them, value(i) being
// the stored value of w.Writes[i]. The chunks of a value not stored (its
// write already is) and of a write it replaces are deleted.
func (s *Store) putWrites(t *tx, w *core.GraphWrites, fp []byte, value func(i int) *storagev1.GraphValueRecord) (core.GraphWritesResult, error) {
	var res core.GraphWritesResult
	already, err := checkRequest(t, w.ThreadID, w.RequestID, fp)
	if err != nil || already {
		res.AlreadyApplied = already
		return res, err
	}
	h, err := threadHead(t, w.ThreadID)
	if err != nil {
		return res, err
	}
	if h != nil && core.LateWrite(h.Deleted, h.DeletedThrough, w.CheckpointID) {
		_, exists, err := t.get(graphCheckpointKey(w.ThreadID, w.NS, w.CheckpointID))
		if err != nil {
			return res, err
		}
		if !exists {
			res.DroppedLate = true
			return res, nil
		}
	}
	upsert := w.IsUpsert()
	for i, x := range w.Writes {
		key := graphWriteKey(w.ThreadID, w.NS, w.CheckpointID, w.TaskID, x.Idx)
		v := value(i)
		raw, exists, err := t.get(key)
		if err != nil {
			return res, err
		}
		if exists && !upsert {
			deleteChunks(t, w.ThreadID, v) // staged by an upload, not needed
			continue
		}
		var old storagev1.GraphWriteRecord
		if exists && decodeValue(key, raw, &old) == nil { // a damaged one is replaced all the same
			deleteChunks(t, w.ThreadID, old.Value)
		}
		if err := put(t, key, &storagev1.GraphWriteRecord{TaskPath: w.TaskPath, Channel: x.Channel, Value: v}); err != nil {
			return res, err
		}
		res.Written++
	}
	if err := s.touchThread(t, w.ThreadID, h); err != nil {
		return res, err
	}
	return res, putRequest(t, w.ThreadID, w.RequestID, fp)
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

// PutCheckpoint implements core.GraphStore.
func (s *Store) PutCheckpoint(ctx context.Context, p *core.GraphPut) (bool, error) {
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
func (s *Store) putCheckpoint(t *tx, c core.GraphCheckpoint, value *storagev1.GraphValueRecord, blobs []core.GraphBlob, values []*storagev1.GraphValueRecord) error {
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

// PutWrites implements core.GraphStore. The late-write rule: once a
// thread has been deleted, a write for a checkpoint id not above the
// greatest id the thread held then is dropped unless that checkpoint has
// been stored again.
func (s *Store) PutWrites(ctx context.Context, w *core.GraphWrites) (core.GraphWritesResult, error) {
	if err := ctx.Err(); err != nil {
		return core.GraphWritesResult{}, err
	}
	defer s.graphShare(w.ThreadID, w.TaskID)()
	var fp []byte
	if w.RequestID != "" {
		fp = w.Fingerprint()
	}
	var res core.GraphWritesResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = s.putWrites(t, w, fp, func(i int) *storagev1.GraphValueRecord { return inlineValue(w.Writes[i].Value) })
		return err
	})
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	return res, nil
}
