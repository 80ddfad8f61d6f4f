package badgerstore

import (
	"bytes"
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// tx is one request's view of the store: reads from a Badger snapshot,
// overlaid with the request's own buffered writes, which the engine commits
// together at the end.
type tx struct {
	r      *badger.Txn
	writes []write
	index  map[string]int // key -> position in writes, past indexAbove writes

	readBytes int            // bytes of stored values read
	findings  *scrubFindings // the scrub's findings; nil: none
	cache     *recordCache   // nil: none
	seq       uint64         // the last durable commit when r was taken: cache entries newer than it are not used
	cacheHits int
}

func (t *tx) get(key []byte) (val []byte, found bool, err error) {
	found, err = t.read(key, func(v []byte) error {
		val = bytes.Clone(v)
		return nil
	})
	return val, found, err
}

// read calls fn with key's value, which is valid only during the call;
// found is false when the key is absent.
func (t *tx) read(key []byte, fn func(val []byte) error) (found bool, err error) {
	if i := t.find(key); i >= 0 {
		w := t.writes[i]
		if w.val == nil {
			return false, nil
		}
		return true, fn(w.val)
	}
	return t.readBase(key, fn)
}

// readBase is read without the transaction's own writes: the value at the
// snapshot.
func (t *tx) readBase(key []byte, fn func(val []byte) error) (found bool, err error) {
	if t.findings != nil {
		if err := t.findings.check(key); err != nil {
			return false, err
		}
	}
	if t.cache != nil && cached(key) {
		if v, ok := t.cache.get(key, t.seq); ok {
			t.readBytes += len(v)
			t.cacheHits++
			return true, fn(v)
		}
	}
	item, err := t.r.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = item.Value(func(v []byte) error {
		t.readBytes += len(v)
		return fn(v)
	})
	return err == nil, err
}

// indexAbove is the number of writes above which find uses a map; a save
// writes a handful.
const indexAbove = 16

// find returns the position of key's write, or -1.
func (t *tx) find(key []byte) int {
	if t.index != nil {
		if i, ok := t.index[string(key)]; ok {
			return i
		}
		return -1
	}
	for i := range t.writes {
		if bytes.Equal(t.writes[i].key, key) {
			return i
		}
	}
	return -1
}

func (t *tx) set(key, val []byte) {
	if val == nil {
		val = []byte{}
	}
	t.record(write{key: key, val: val})
}

func (t *tx) delete(key []byte) { t.record(write{key: key}) }

func (t *tx) record(w write) {
	if i := t.find(w.key); i >= 0 {
		t.writes[i] = w
		return
	}
	if t.index == nil && len(t.writes) == indexAbove {
		t.index = make(map[string]int, 2*indexAbove)
		for i, w := range t.writes {
			t.index[string(w.key)] = i
		}
	}
	if t.index != nil {
		t.index[string(w.key)] = len(t.writes)
	}
	t.writes = append(t.writes, w)
}
