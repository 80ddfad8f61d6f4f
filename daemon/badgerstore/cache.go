package badgerstore

import "sync"

// The record cache keeps the newest durable value of the small records every
// write reads back: session heads (and tombstones) and ledger entries. It is
// filled only by the engine, after a commit's sync succeeded, with what that
// commit wrote; it never holds a value the disk does not.
//
// A transaction may use an entry only when the entry's commit is no newer
// than the transaction's snapshot: before a batch goes to Badger, the
// entries of its keys are dropped, so while a commit is visible but not yet
// synced its keys are read from the snapshot; after the sync they come back
// stamped with the commit's sequence number, which a snapshot taken earlier
// ignores. A failed commit or sync empties the cache, and so does every
// exclusive operation (DropPrefix removes keys without a commit).

// cacheBudget bounds the bytes of values the cache holds; past it, entries
// are evicted in no particular order.
const cacheBudget = 4 << 20

// cacheMaxValue is the largest value cached: a head with large labels is read
// from Badger.
const cacheMaxValue = 16 << 10

type cacheEntry struct {
	val []byte
	seq uint64 // the commit that wrote val
}

type recordCache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
	bytes   int
}

func newRecordCache() *recordCache {
	return &recordCache{entries: make(map[string]cacheEntry)}
}

// cached reports whether key is of a kind the cache keeps.
func cached(key []byte) bool {
	return len(key) > 0 && (key[0] == kindSession || key[0] == kindLedgerEntry)
}

// get returns key's value when it was committed at or before seq. The value
// must not be modified.
func (c *recordCache) get(key []byte, seq uint64) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.entries[string(key)]
	c.mu.Unlock()
	if !ok || e.seq > seq {
		return nil, false
	}
	return e.val, true
}

// forget drops the entries of every key batch writes, before Badger makes it
// visible.
func (c *recordCache) forget(batch []*op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range batch {
		for _, w := range o.writes {
			if cached(w.key) {
				c.drop(string(w.key))
			}
		}
	}
}

// remember records what batch, committed durably as seq, wrote: a value is
// copied, a delete leaves no entry.
func (c *recordCache) remember(batch []*op, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range batch {
		for _, w := range o.writes {
			if !cached(w.key) {
				continue
			}
			k := string(w.key)
			c.drop(k)
			if w.val == nil || len(w.val) > cacheMaxValue {
				continue
			}
			for c.bytes+len(k)+len(w.val) > cacheBudget && len(c.entries) > 0 {
				for old := range c.entries {
					c.drop(old)
					break
				}
			}
			c.entries[k] = cacheEntry{val: append([]byte(nil), w.val...), seq: seq}
			c.bytes += len(k) + len(w.val)
		}
	}
}

func (c *recordCache) drop(k string) {
	if e, ok := c.entries[k]; ok {
		c.bytes -= len(k) + len(e.val)
		delete(c.entries, k)
	}
}

// clear empties the cache.
func (c *recordCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.bytes = 0
}

// len returns the number of entries.
func (c *recordCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
