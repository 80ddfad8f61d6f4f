package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// The engine is the store's only writer. Requests that arrive while a commit
// is in flight are folded into the next Badger transaction, which is then
// made durable by one db.Sync covering both Badger's write-ahead log and its
// value log; each request is acknowledged, and the commit made readable
// (snapshot.go), only after that sync. Badger runs with SyncWrites off so
// that its value-log sync errors, which it would only log, are returned by
// db.Sync instead, and in managed mode, with the engine numbering the
// commits. Any commit or sync failure is fatal: the engine stops
// acknowledging and reports on Failed.

// seqKey holds the sequence number of the last commit.
var seqKey = []byte{kindFormat, 's', 'e', 'q'}

// entryOverhead is a generous bound on what Badger adds to each entry when
// it sizes a transaction (meta bytes, varints, value pointer).
const entryOverhead = 32

// inTxn is what a value of n bytes counts for in a Badger transaction: a
// value of the threshold or more goes to the value log and counts as its
// 12-byte pointer.
func (e *engine) inTxn(n int) int {
	if n >= e.threshold {
		return 12
	}
	return n
}

type write struct {
	key, val []byte // val nil deletes key
}

type op struct {
	writes []write
	size   int64
	probe  bool // a Ping: answered by the loop after the batch it joins, writing nothing
	// exclusive, when set, is run by the loop alone, between two commits,
	// for Badger calls that must not meet a write (DropPrefix).
	exclusive func() error
	done      chan error
}

// Stats counts the engine's work since Open.
type Stats struct {
	Requests uint64 // write requests acknowledged
	Commits  uint64 // Badger transactions committed, each followed by one sync
	Seq      uint64 // sequence number of the last durable commit
	// WriteReadBytes counts the bytes of stored values that writes (saves,
	// effects, resumes, deletes) read before writing.
	WriteReadBytes uint64
	// DamagedTables counts the tables the background scrub found damaged.
	DamagedTables uint64
	// CacheHits counts the reads of session heads and call records that the
	// record cache answered instead of Badger (cache.go).
	CacheHits uint64
}

type engine struct {
	db        *badger.DB
	dir       string // "" in memory: no disk guard
	reserve   uint64 // free bytes a commit needs on the data directory's filesystem
	maxSize   int64  // Badger's transaction limits, with room for seqKey
	maxCount  int64
	threshold int                                       // Badger's value threshold
	statfs    func(dir string) (free uint64, err error) // replaced in tests
	sync      func() error                              // replaced in tests
	files     *dataFiles                                // nil in memory (engine_files.go)
	onCommit  func(seq uint64)
	cache     *recordCache // the newest durable heads and call records (cache.go)
	snaps     *snapshots   // read versions (snapshot.go)
	version   uint64       // Badger version of the last commit; owned by the loop

	ops    chan *op
	stop   chan struct{}
	exited chan struct{} // closed when loop has drained ops and returned
	wg     sync.WaitGroup

	failOnce sync.Once
	failed   chan struct{}
	failErr  atomic.Value // error

	requests, commits, seq atomic.Uint64

	batchSizes  prometheus.Histogram // requests per commit
	syncSeconds prometheus.Histogram // db.Sync latency
	sessions    cachedCount          // the savepoint_sessions gauge (metrics.go)
}

func newEngine(db *badger.DB, dir string, reserve uint64, seq uint64, onCommit func(uint64)) *engine {
	e := &engine{
		db: db, dir: dir, reserve: reserve,
		maxSize:   db.MaxBatchSize() - int64(len(seqKey)+8+entryOverhead),
		maxCount:  db.MaxBatchCount() - 1,
		threshold: int(db.Opts().ValueThreshold),
		statfs:    freeBytes,
		sync:      db.Sync,
		onCommit:  onCommit,
		cache:     newRecordCache(),
		snaps:     newSnapshots(db.MaxVersion()),
		version:   db.MaxVersion(),
		ops:       make(chan *op, 1024),
		stop:      make(chan struct{}),
		exited:    make(chan struct{}),
		failed:    make(chan struct{}),
		batchSizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "savepoint_store_commit_batch_requests",
			Help:    "Write requests folded into one Badger commit and its sync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "savepoint_store_sync_seconds",
			Help:    "Time of the sync that makes one commit durable.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}),
	}
	if dir != "" {
		e.files = &dataFiles{dir: dir}
	}
	if skipSync {
		e.sync = func() error { return nil }
	}
	e.seq.Store(seq)
	db.SetDiscardTs(e.version) // no reader yet: older versions are for compaction to drop
	e.wg.Add(1)
	go e.loop()
	return e
}

// commit writes ws atomically and returns once they are durable.
func (e *engine) commit(ws []write) error {
	o := &op{writes: ws, done: make(chan error, 1)}
	for _, w := range ws {
		o.size += int64(len(w.key) + e.inTxn(len(w.val)) + entryOverhead)
	}
	if o.size > e.maxSize || int64(len(ws)) > e.maxCount {
		return fmt.Errorf("%w: one request writes %d bytes in %d entries, over the store's transaction limit of %d bytes and %d entries",
			core.ErrInvalidArgument, o.size, len(ws), e.maxSize, e.maxCount)
	}
	if err := e.err(); err != nil {
		return err
	}
	select {
	case e.ops <- o:
	case <-e.stop:
		return fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
	}
	// ops has room even after the loop ended, so the send above can win
	// over stop; then nobody takes o, and waiting on done alone would hang.
	select {
	case err := <-o.done:
		return err
	case <-e.exited:
		select {
		case err := <-o.done: // drained, or committed, before the loop ended
			return err
		default:
			return fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
		}
	}
}

// ping passes a request through the commit loop that writes and syncs
// nothing, so it fails when the loop is dead, stuck in a commit past ctx's
// deadline, or failed, and never for a full disk.
// runExclusive runs fn in the commit loop with no commit in progress, and
// returns its error.
func (e *engine) runExclusive(ctx context.Context, fn func() error) error {
	return e.send(ctx, &op{exclusive: fn, done: make(chan error, 1)})
}

func (e *engine) ping(ctx context.Context) error {
	return e.send(ctx, &op{probe: true, done: make(chan error, 1)})
}

// send hands o to the loop and waits for its answer.
func (e *engine) send(ctx context.Context, o *op) error {
	select {
	case <-e.stop: // checked first: ops has room even after the loop ended
		return fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
	default:
	}
	select {
	case e.ops <- o:
	case <-e.stop:
		return fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
	case <-ctx.Done():
		return fmt.Errorf("%w: the commit loop took no request: %v", core.ErrUnavailable, ctx.Err())
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the commit loop did not answer: %v", core.ErrUnavailable, ctx.Err())
	}
}

func (e *engine) err() error {
	if err, _ := e.failErr.Load().(error); err != nil {
		return fmt.Errorf("%w: the store failed and savepointd is stopping: %v", core.ErrUnavailable, err)
	}
	return nil
}

func (e *engine) fail(err error) {
	e.failOnce.Do(func() {
		e.failErr.Store(err)
		close(e.failed)
	})
}

func (e *engine) close() {
	close(e.stop)
	e.wg.Wait()
	if e.files != nil {
		e.files.close()
	}
}

func (e *engine) loop() {
	defer e.wg.Done()
	defer close(e.exited)
	var carry *op
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-e.ops:
			case <-e.stop:
				e.drain()
				return
			}
		}
		if first.exclusive != nil {
			e.cache.clear() // it may remove keys without a commit
			first.done <- first.exclusive()
			continue
		}
		batch := []*op{first}
		size, count := first.size, int64(len(first.writes))
	fold:
		for {
			select {
			case o := <-e.ops:
				if o.exclusive != nil || size+o.size > e.maxSize || count+int64(len(o.writes)) > e.maxCount {
					carry = o // batches split only at request boundaries
					break fold
				}
				batch = append(batch, o)
				size += o.size
				count += int64(len(o.writes))
			default:
				break fold
			}
		}
		e.commitBatch(batch)
	}
}

// drain answers the requests still queued at close.
func (e *engine) drain() {
	for {
		select {
		case o := <-e.ops:
			o.done <- fmt.Errorf("%w: the store is closing", core.ErrUnavailable)
		default:
			return
		}
	}
}

func (e *engine) commitBatch(batch []*op) {
	// Probes are answered after the writes they were folded with, so one
	// waits out a slow commit; a batch of probes alone writes nothing.
	var probes []*op
	writes := batch[:0:0]
	for _, o := range batch {
		if o.probe {
			probes = append(probes, o)
		} else {
			writes = append(writes, o)
		}
	}
	if len(writes) > 0 {
		e.commitWrites(writes)
	}
	for _, o := range probes {
		o.done <- e.err()
	}
}

func (e *engine) commitWrites(batch []*op) {
	if brokenAckBeforeSync {
		for _, o := range batch {
			o.done <- nil
		}
		time.Sleep(100 * time.Millisecond) // a window in which a kill loses acknowledged writes
		e.write(batch)
		return
	}
	err := e.err()
	if err == nil && e.dir != "" {
		err = e.checkSpace()
	}
	if err == nil {
		err = e.write(batch)
	}
	if err == nil {
		e.batchSizes.Observe(float64(len(batch)))
		e.commits.Add(1)
		e.requests.Add(uint64(len(batch)))
		if e.onCommit != nil {
			e.onCommit(e.seq.Load())
		}
	}
	for _, o := range batch {
		o.done <- err
	}
}

func (e *engine) checkSpace() error {
	free, err := e.statfs(e.dir)
	if err != nil {
		return fmt.Errorf("statfs %s: %w", e.dir, err)
	}
	if free < e.reserve {
		return fmt.Errorf("%w: %d bytes free on the data directory's filesystem, %d reserved; free space to resume writes (reads keep working)",
			core.ErrDiskFull, free, e.reserve)
	}
	return nil
}

func (e *engine) write(batch []*op) error {
	seq := e.seq.Load() + 1
	e.cache.forget(batch) // before Badger makes the batch visible
	version := e.version + 1
	txn := e.db.NewTransactionAt(e.version, true)
	defer txn.Discard()
	wroteValues := false // a value went to the value log
	for _, o := range batch {
		for _, w := range o.writes {
			var err error
			wroteValues = wroteValues || len(w.val) >= e.threshold
			if w.val == nil {
				err = txn.Delete(w.key)
			} else {
				err = txn.Set(w.key, w.val)
			}
			if err != nil {
				// Sized against the limits above, so this is not ErrTxnTooBig.
				e.fail(err)
				return e.err()
			}
		}
	}
	if err := txn.Set(seqKey, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		e.fail(err)
		return e.err()
	}
	if err := txn.CommitAt(version, nil); err != nil {
		e.cache.clear()
		e.fail(fmt.Errorf("commit: %w", err))
		return e.err()
	}
	start := time.Now()
	if e.files != nil {
		if err := e.files.beforeSync(start, wroteValues); err != nil {
			e.cache.clear()
			e.fail(err)
			return e.err()
		}
	}
	if err := e.sync(); err != nil {
		e.cache.clear()
		e.fail(fmt.Errorf("sync: %w", err))
		return e.err()
	}
	if e.files != nil {
		if err := e.files.afterSync(); err != nil {
			e.cache.clear()
			e.fail(err)
			return e.err()
		}
	}
	e.syncSeconds.Observe(time.Since(start).Seconds())
	e.version = version
	e.cache.remember(batch, seq)
	e.db.SetDiscardTs(e.snaps.advance(version))
	e.seq.Store(seq) // after advance: a reader of seq reads at version or later (newTx)
	return nil
}

func (e *engine) stats() Stats {
	return Stats{Requests: e.requests.Load(), Commits: e.commits.Load(), Seq: e.seq.Load()}
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

var errNoSeq = errors.New("no commit sequence number")

// readSeq returns the sequence number of the last commit in db.
func readSeq(db *badger.DB) (uint64, error) {
	var seq uint64
	txn := db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	err := func() error {
		item, err := txn.Get(seqKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return errNoSeq
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("commit sequence number of %d bytes", len(v))
			}
			seq = binary.BigEndian.Uint64(v)
			return nil
		})
	}()
	return seq, err
}
