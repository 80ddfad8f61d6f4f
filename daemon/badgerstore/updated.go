package badgerstore

import (
	"bytes"
	"context"

	"github.com/dgraph-io/badger/v4"

	"github.com/savepoint-dev/savepoint/daemon/core"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// indexUpdates keeps the index by update time (kindUpdated) in step with
// the heads t writes, in the same commit: for each head written, the entry
// of the head at the snapshot goes and the new live head's comes. Every
// write of the store passes through it (Store.update), so no writer of a
// head can forget the index.
func (t *tx) indexUpdates() error {
	n := len(t.writes) // the index entries appended below are not heads
	for i := 0; i < n; i++ {
		w := t.writes[i]
		if len(w.key) < 2 || w.key[0] != kindSession {
			continue
		}
		_, sid, _, err := decodeKey(w.key)
		if err != nil {
			continue
		}
		var oldKey, newKey []byte
		var old storagev1.SessionRecord
		found, err := t.readBase(w.key, func(v []byte) error { return decodeValue(w.key, v, &old) })
		if found && err == nil && !old.Deleted {
			oldKey = updatedKey(timeOf(old.UpdateTime), sid)
		}
		var h storagev1.SessionRecord
		if w.val != nil && decodeValue(w.key, w.val, &h) == nil && !h.Deleted {
			newKey = updatedKey(timeOf(h.UpdateTime), sid)
		}
		if bytes.Equal(oldKey, newKey) {
			continue
		}
		if oldKey != nil {
			t.delete(oldKey)
		}
		if newKey != nil {
			if err := put(t, newKey, &storagev1.UpdateIndexRecord{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// ListSessionsByUpdate implements core.Store: it walks the index by update
// time from the cursor (or, with filter.UpdatedBefore, from the first
// session updated before it, whichever is further) and reads each listed
// head. A head that cannot be decoded is listed with its id and its index
// entry's time.
func (s *Store) ListSessionsByUpdate(ctx context.Context, after core.UpdateCursor, limit int, filter core.SessionFilter) ([]core.SessionSummary, error) {
	var out []core.SessionSummary
	err := s.view(ctx, func(t *tx) error {
		out = out[:0]
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindUpdated}})
		defer it.Close()
		seek := []byte{kindUpdated}
		var skip []byte
		if after != (core.UpdateCursor{}) {
			seek = updatedKey(after.UpdateTime, after.SessionID)
			skip = seek
		}
		if !filter.UpdatedBefore.IsZero() {
			if first := updatedKey(filter.UpdatedBefore.Add(-1), ""); bytes.Compare(first, seek) > 0 {
				seek, skip = first, nil
			}
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			key := it.Item().KeyCopy(nil)
			if bytes.Equal(key, skip) {
				continue
			}
			at, sid, err := decodeUpdatedKey(key)
			if err != nil {
				continue
			}
			var h storagev1.SessionRecord
			found, err := t.read(sessionKey(sid), func(v []byte) error { return decodeValue(sessionKey(sid), v, &h) })
			if err != nil {
				// A damaged head is listed so an operator can find and delete it.
				out = append(out, core.SessionSummary{SessionID: sid, UpdateTime: at})
				continue
			}
			if !found || unixNanos(timeOf(h.UpdateTime)) != at.UnixNano() {
				continue // an entry its head does not name: never so, but an index must not invent or repeat sessions
			}
			if ss, ok, err := listed(t, sid, &h, filter); err != nil {
				return err
			} else if ok {
				out = append(out, ss)
			}
		}
		return nil
	})
	return out, err
}
