package badgerstore

import (
	"context"

	"github.com/dgraph-io/badger/v4"

	"github.com/savepoint-dev/savepoint/daemon/core"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// ListThreads implements core.GraphStore: it walks the thread heads in key
// order, which is thread id order (no thread id holds NUL), skipping those
// a delete or copy has hidden and those without a checkpoint; a head that
// cannot be decoded is listed with its id only.
func (s *Store) ListThreads(ctx context.Context, after string, limit int) ([]core.GraphThread, error) {
	var out []core.GraphThread
	err := s.view(ctx, func(t *tx) error {
		out = out[:0]
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindGraphThread}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		seek := []byte{kindGraphThread}
		if after != "" {
			seek = graphThreadKey(after)
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			key := it.Item().KeyCopy(nil)
			thread, _, _, ok := splitGraphKey(key, 0)
			if !ok || thread == after {
				continue
			}
			var h storagev1.GraphThreadRecord
			if err := it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }); err != nil {
				// A damaged head is listed so an operator can find and delete it.
				out = append(out, core.GraphThread{ThreadID: thread})
				continue
			}
			if hidden(&h) || len(keysWithPrefixLimit(t.r, graphKey(kindGraphCheckpoint, thread), 1)) == 0 {
				continue
			}
			out = append(out, core.GraphThread{ThreadID: thread, UpdateTime: timeOf(h.UpdateTime)})
		}
		return nil
	})
	return out, err
}
