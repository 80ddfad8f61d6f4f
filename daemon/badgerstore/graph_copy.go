package badgerstore

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// CopyThread implements core.GraphStore. The source is read from one
// snapshot, so the copy is of one moment of it; the target is replaced.
func (s *Store) CopyThread(ctx context.Context, source, target string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if source == target {
		return 0, fmt.Errorf("%w: thread %q cannot be copied onto itself", core.ErrInvalidArgument, source)
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
		for _, kind := range []byte{kindGraphBlob, kindGraphWrite, kindGraphEffect, kindGraphCheckpoint} {
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
