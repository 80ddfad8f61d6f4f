package badgerstore

import (
	"context"
	"crypto/rand"
	"hash"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// An upload stages each value's bytes in chunk records of graphChunkBytes
// under a random owner id, a few chunks per commit, while its upload record
// marks them as not yet visible. Commit then writes the checkpoint and blob
// records pointing at the chunks and deletes the upload record, all in one
// small commit. An aborted upload's chunks are deleted at once; Open deletes
// those of any upload record it finds (no upload outlives its process).
const (
	graphChunkBytes = 1 << 20
	// graphBatchBytes is how much a staging, copy or delete batch writes per
	// commit, under the engine's transaction limit.
	graphBatchBytes = 3 << 20
)

// stagedUpload is what the uploads of a checkpoint and of writes share:
// chunks staged under a random owner, and the upload record that marks them
// as not yet visible.
type stagedUpload struct {
	*core.UploadStager
	s      *Store
	thread string
	owner  []byte
	done   bool
}

// beginStaged writes the upload record of a new upload of values of the
// given sizes to thread.
func (s *Store) beginStaged(ctx context.Context, thread string, sizes []int64, digest hash.Hash) (*stagedUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := &stagedUpload{s: s, thread: thread, owner: make([]byte, 16)}
	if _, err := rand.Read(u.owner); err != nil {
		return nil, err
	}
	u.UploadStager = core.NewUploadStager(sizes, digest, graphChunkBytes, graphBatchBytes, u.stage)
	defer s.graphShare(thread, "")()
	err := s.update(func(t *tx) error {
		return put(t, graphUploadKey(thread, u.owner), &storagev1.GraphUploadRecord{StartTime: timestamppb.New(s.now())})
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

type graphUpload struct {
	*stagedUpload
	p *core.GraphPut
}

// BeginUpload implements core.GraphStore.
func (s *Store) BeginUpload(ctx context.Context, p *core.GraphPut) (core.GraphUpload, error) {
	u, err := s.beginStaged(ctx, p.Checkpoint.ThreadID, p.UploadSizes(), p.UploadDigest())
	if err != nil {
		return nil, err
	}
	return &graphUpload{stagedUpload: u, p: p}, nil
}

// stage commits a batch of chunks, under the thread's shared lock so that
// a delete of the thread cannot run between the check and the commit.
func (u *stagedUpload) stage(_ context.Context, chunks []core.UploadChunk) error {
	writes := make([]write, 0, len(chunks))
	for _, c := range chunks {
		key := graphChunkKey(u.thread, u.owner, c.Value, c.Seq)
		val, err := encodeValue(key, &storagev1.GraphChunkRecord{Data: c.Data})
		if err != nil {
			return err
		}
		writes = append(writes, write{key: key, val: val})
	}
	defer u.s.graphShare(u.thread, "")()
	return u.s.update(func(t *tx) error {
		if err := u.check(t); err != nil {
			return err
		}
		for _, w := range writes {
			t.set(w.key, w.val)
		}
		return nil
	})
}

// check fails when the upload record is gone: the thread was deleted or
// copied over meanwhile.
func (u *stagedUpload) check(t *tx) error {
	_, found, err := t.get(graphUploadKey(u.thread, u.owner))
	if err != nil {
		return err
	}
	if !found {
		return core.UploadAborted(u.thread)
	}
	return nil
}

func (u *stagedUpload) valueRecord(i int, typ string) *storagev1.GraphValueRecord {
	if u.Size(i) == 0 {
		return &storagev1.GraphValueRecord{Type: typ}
	}
	return &storagev1.GraphValueRecord{Type: typ, ChunkOwner: u.owner, ChunkValue: uint32(i), ChunkCount: u.Chunks(i), Size: u.Size(i)}
}

// Commit implements core.GraphUpload.
func (u *graphUpload) Commit(ctx context.Context) (bool, error) {
	fp, err := u.Finish(ctx)
	if err != nil {
		return false, err
	}
	c := u.p.Checkpoint
	var already bool
	err = func() error {
		defer u.s.graphLock(u.thread)()
		return u.s.update(func(t *tx) error {
			if err := u.check(t); err != nil {
				return err
			}
			var err error
			if already, err = checkRequest(t, u.thread, u.p.RequestID, fp); err != nil || already {
				return err
			}
			values := make([]*storagev1.GraphValueRecord, len(u.p.Blobs))
			for i, b := range u.p.Blobs {
				values[i] = u.valueRecord(i+1, b.Value.Type)
			}
			if err := u.s.putCheckpoint(t, c, u.valueRecord(0, c.Value.Type), u.p.Blobs, values); err != nil {
				return err
			}
			t.delete(graphUploadKey(u.thread, u.owner))
			return putRequest(t, u.thread, u.p.RequestID, fp)
		})
	}()
	if err != nil || already {
		return already, err // Abort removes the staged chunks
	}
	u.done = true
	return false, nil
}

// Abort implements core.GraphUpload and core.GraphWritesUpload.
func (u *stagedUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.Discard()
	if err := u.s.dropUpload(u.thread, u.owner); err != nil {
		u.s.log.Error("remove an aborted upload's staged chunks; the next start removes them", "thread_id", u.thread, "err", err)
	}
}

type writesUpload struct {
	*stagedUpload
	w *core.GraphWrites
}

// BeginWritesUpload implements core.GraphStore.
func (s *Store) BeginWritesUpload(ctx context.Context, w *core.GraphWrites) (core.GraphWritesUpload, error) {
	u, err := s.beginStaged(ctx, w.ThreadID, w.UploadSizes(), w.UploadDigest())
	if err != nil {
		return nil, err
	}
	return &writesUpload{stagedUpload: u, w: w}, nil
}

// Commit implements core.GraphWritesUpload: the writes pointing at their
// staged chunks, in one commit that deletes the upload record, as
// PutWrites stores them.
func (u *writesUpload) Commit(ctx context.Context) (core.GraphWritesResult, error) {
	fp, err := u.Finish(ctx)
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	var res core.GraphWritesResult
	err = func() error {
		defer u.s.graphShare(u.thread, u.w.TaskID)()
		return u.s.update(func(t *tx) error {
			if err := u.check(t); err != nil {
				return err
			}
			var err error
			if res, err = u.s.putWrites(t, u.w, fp, func(i int) *storagev1.GraphValueRecord {
				return u.valueRecord(i, u.w.Writes[i].Value.Type)
			}); err != nil {
				return err
			}
			if res.AlreadyApplied || res.DroppedLate {
				return nil // nothing stored: Abort removes the staged chunks
			}
			t.delete(graphUploadKey(u.thread, u.owner))
			return nil
		})
	}()
	if err != nil || res.AlreadyApplied || res.DroppedLate {
		return res, err
	}
	u.done = true
	return res, nil
}

// dropUpload deletes an upload's staged chunks and then its record.
func (s *Store) dropUpload(thread string, owner []byte) error {
	defer s.graphShare(thread, "")()
	prefix := append(graphKey(kindGraphChunk, thread), owner...)
	if _, err := s.deletePrefix(prefix); err != nil {
		return err
	}
	return s.update(func(t *tx) error {
		t.delete(graphUploadKey(thread, owner))
		return nil
	})
}
