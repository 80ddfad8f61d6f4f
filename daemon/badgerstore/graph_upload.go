package badgerstore

import (
	"context"
	"crypto/rand"
	"fmt"
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

type graphUpload struct {
	s      *Store
	p      *core.GraphPut
	thread string
	owner  []byte
	fp     hash.Hash // nil without a request id

	sizes  []int64  // declared: the checkpoint's value, then each blob's
	chunks []uint32 // chunks staged per value
	cur    int      // the value being received
	got    int64    // its bytes received
	buf    []byte   // its bytes not yet in a chunk

	pending     []write
	pendingSize int
	done        bool
}

// BeginUpload implements core.GraphStore.
func (s *Store) BeginUpload(ctx context.Context, p *core.GraphPut) (core.GraphUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := &graphUpload{s: s, p: p, thread: p.Checkpoint.ThreadID, owner: make([]byte, 16)}
	if _, err := rand.Read(u.owner); err != nil {
		return nil, err
	}
	if p.RequestID != "" {
		u.fp = p.Fingerprint()
	}
	u.sizes = append(u.sizes, p.Checkpoint.Value.Size)
	for _, b := range p.Blobs {
		u.sizes = append(u.sizes, b.Value.Size)
	}
	u.chunks = make([]uint32, len(u.sizes))
	u.skipEmpty()
	defer s.graphShare(u.thread, "")()
	err := s.update(func(t *tx) error {
		return put(t, graphUploadKey(u.thread, u.owner), &storagev1.GraphUploadRecord{StartTime: timestamppb.New(s.now())})
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (u *graphUpload) skipEmpty() {
	for u.cur < len(u.sizes) && u.got == u.sizes[u.cur] {
		u.cur++
		u.got = 0
	}
}

// Write implements core.GraphUpload.
func (u *graphUpload) Write(ctx context.Context, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.fp != nil {
		u.fp.Write(p)
	}
	for len(p) > 0 {
		if u.cur >= len(u.sizes) {
			return fmt.Errorf("%w: the upload sent more bytes than its start declares", core.ErrInvalidArgument)
		}
		n := min(int64(len(p)), u.sizes[u.cur]-u.got, int64(graphChunkBytes-len(u.buf)))
		u.buf = append(u.buf, p[:n]...)
		u.got += n
		p = p[n:]
		if len(u.buf) == graphChunkBytes || u.got == u.sizes[u.cur] {
			if err := u.stageChunk(); err != nil {
				return err
			}
		}
		u.skipEmpty()
	}
	return nil
}

func (u *graphUpload) stageChunk() error {
	key := graphChunkKey(u.thread, u.owner, uint32(u.cur), u.chunks[u.cur])
	val, err := encodeValue(key, &storagev1.GraphChunkRecord{Data: u.buf})
	if err != nil {
		return err
	}
	u.chunks[u.cur]++
	u.buf = nil
	u.pending = append(u.pending, write{key: key, val: val})
	u.pendingSize += len(key) + len(val)
	if u.pendingSize >= graphBatchBytes {
		return u.flush()
	}
	return nil
}

// flush commits the staged chunks, under the thread's shared lock so that
// a delete of the thread cannot run between the check and the commit.
func (u *graphUpload) flush() error {
	if len(u.pending) == 0 {
		return nil
	}
	defer u.s.graphShare(u.thread, "")()
	err := u.s.update(func(t *tx) error {
		if err := u.check(t); err != nil {
			return err
		}
		for _, w := range u.pending {
			t.set(w.key, w.val)
		}
		return nil
	})
	u.pending, u.pendingSize = nil, 0
	return err
}

// check fails when the upload record is gone: the thread was deleted or
// copied over meanwhile.
func (u *graphUpload) check(t *tx) error {
	_, found, err := t.get(graphUploadKey(u.thread, u.owner))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: thread %q was deleted or copied over during the upload; nothing was stored", core.ErrUploadAborted, u.thread)
	}
	return nil
}

func (u *graphUpload) valueRecord(i int, typ string) *storagev1.GraphValueRecord {
	if u.sizes[i] == 0 {
		return &storagev1.GraphValueRecord{Type: typ}
	}
	return &storagev1.GraphValueRecord{Type: typ, ChunkOwner: u.owner, ChunkValue: uint32(i), ChunkCount: u.chunks[i], Size: u.sizes[i]}
}

// Commit implements core.GraphUpload.
func (u *graphUpload) Commit(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if u.cur < len(u.sizes) {
		return false, fmt.Errorf("%w: the upload ended before every declared byte", core.ErrInvalidArgument)
	}
	if err := u.flush(); err != nil {
		return false, err
	}
	var fp []byte
	if u.fp != nil {
		fp = u.fp.Sum(nil)
	}
	c := u.p.Checkpoint
	var already bool
	err := func() error {
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

// Abort implements core.GraphUpload.
func (u *graphUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.pending = nil
	if err := u.s.dropUpload(u.thread, u.owner); err != nil {
		u.s.log.Error("remove an aborted upload's staged chunks; the next start removes them", "thread_id", u.thread, "err", err)
	}
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
