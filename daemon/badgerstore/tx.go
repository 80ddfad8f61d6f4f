package badgerstore

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// tx is one request's view of the store: reads from a Badger snapshot,
// overlaid with the request's own buffered writes, which the engine commits
// together at the end.
type tx struct {
	r      *badger.Txn
	writes []write
	index  map[string]int // key -> position in writes
	read   int            // bytes of stored values read
}

func (t *tx) get(key []byte) (val []byte, found bool, err error) {
	if i, ok := t.index[string(key)]; ok {
		w := t.writes[i]
		return w.val, w.val != nil, nil
	}
	item, err := t.r.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val, err = item.ValueCopy(nil)
	t.read += len(val)
	return val, err == nil, err
}

func (t *tx) set(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	t.record(write{key: key, val: val})
}

func (t *tx) delete(key []byte) { t.record(write{key: key}) }

func (t *tx) record(w write) {
	if t.index == nil {
		t.index = map[string]int{}
	}
	if i, ok := t.index[string(w.key)]; ok {
		t.writes[i] = w
		return
	}
	t.index[string(w.key)] = len(t.writes)
	t.writes = append(t.writes, w)
}
