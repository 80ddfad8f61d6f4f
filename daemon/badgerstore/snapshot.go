package badgerstore

import "sync"

// Badger runs in managed mode. The engine, the store's only writer, gives
// each commit its Badger version (the commit timestamp), and every reader
// reads at the version of the last durable commit, so a reader never sees a
// commit before its sync. Badger then keeps no read or commit watermarks of
// its own, which in its default mode cost every transaction hand-offs to a
// goroutine of Badger's and made a reader wait for a commit in flight; in
// exchange the store must tell Badger which old versions no reader needs:
// snapshots counts the readers of each version, and after each commit the
// engine sets Badger's discard timestamp to the oldest version still read,
// as Badger's own read watermark would. Open sets it to the newest version
// as soon as Badger is open, since Badger's compactors start with 0, which
// keeps every version.

// snapshots hands out read versions and knows the oldest one in use. The
// zero value is not ready: use newSnapshots.
type snapshots struct {
	mu      sync.Mutex
	latest  uint64         // the version of the last durable commit
	readers map[uint64]int // versions being read -> their readers
}

func newSnapshots(latest uint64) *snapshots {
	return &snapshots{latest: latest, readers: map[uint64]int{}}
}

// open returns the version a new reader reads at; the caller calls close
// with it once done.
func (s *snapshots) open() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers[s.latest]++
	return s.latest
}

// close ends a read of version v that open returned.
func (s *snapshots) close(v uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[v]--; s.readers[v] <= 0 {
		delete(s.readers, v)
	}
}

// advance makes v, a version now durable, the one new readers read at, and
// returns the version at or below which Badger may discard what v and the
// versions still read supersede: the oldest version being read, or v. A
// reader opened after advance reads at v or later, so the value returned
// stays at or below every reader's version even once the lock is released.
func (s *snapshots) advance(v uint64) (discard uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest = v
	discard = v
	for r := range s.readers {
		discard = min(discard, r)
	}
	return discard
}
