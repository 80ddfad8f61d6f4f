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

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/wal"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/internal/faults"

	"github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// The engine is the store's only writer. Requests that arrive while a commit
// is in flight are folded into the next one. Each commit is one record of
// the write-ahead log (internal/wal), made durable by one fdatasync of its
// segment, and only then applied to Badger as one transaction, with no
// sync: Badger is made durable in the background (checkpoint.go). Each
// request is acknowledged, and the commit made readable (snapshot.go), only
// after both. The request that finds no commit in flight commits its batch
// on its own goroutine, as leader, and hands leadership to the first
// request that queued behind it (engine_queue.go). Badger runs with
// SyncWrites off and in managed mode, with the engine numbering the
// commits. Any log write, sync, apply or checkpoint failure is fatal: the
// engine stops acknowledging and reports on Failed.

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
	writes   []write
	size     int64 // what it counts for in a Badger transaction
	logBytes int64 // a bound on its share of a log record
	probe    bool  // a Ping: answered after the batch it joins, writing nothing
	// exclusive, when set, is run alone by its own goroutine as leader,
	// between two commits, for Badger calls that must not meet a write
	// (DropPrefix).
	exclusive func() error
	done      chan error // capacity 1: the answer, or errLead
	lead      bool       // made leader (engine_queue.go); guarded by the engine's mu

}

// Stats counts the engine's work since Open.
type Stats struct {
	Requests uint64 // write requests acknowledged
	Commits  uint64 // commits: each one log record and its sync, then one Badger transaction
	Seq      uint64 // sequence number of the last durable commit
	// WriteReadBytes counts the bytes of stored values that writes (saves,
	// effects, resumes, deletes) read before writing.
	WriteReadBytes uint64
	// DamagedTables counts the tables the background scrub found damaged.
	DamagedTables uint64
	// CacheHits counts the reads of session heads and ledger entries that the
	// record cache answered instead of Badger (cache.go).
	CacheHits uint64
}

type engine struct {
	db         *badger.DB
	dir        string // "" in memory: no disk guard, no log
	reserve    uint64 // free bytes a commit needs on the data directory's filesystem
	maxSize    int64  // Badger's transaction limits, with room for seqKey
	maxCount   int64
	threshold  int                                       // Badger's value threshold
	statfs     func(dir string) (free uint64, err error) // replaced in tests
	sync       func() error                              // makes a commit's log record durable; replaced in tests
	badgerSync func() error                              // db.Sync, at a checkpoint; replaced in tests
	wal        *wal.Log                                  // nil in memory
	files      *dataFiles                                // nil in memory (engine_files.go)
	onCommit   func(seq uint64)
	cache      *recordCache // the newest durable heads and ledger entries (cache.go)
	snaps      *snapshots   // read versions (snapshot.go)
	version    uint64       // Badger version of the last commit; owned by the committer

	// mu guards the queue and the right to commit: busy is set while a
	// leader holds it (engine_queue.go).
	mu      sync.Mutex
	queue   []*op
	busy    bool
	closed  bool
	leaders sync.WaitGroup // one while busy

	stop chan struct{}
	wg   sync.WaitGroup // the checkpointer

	ckptMu sync.Mutex // one checkpoint at a time
	// tables are the ids TablesFile holds, once written (tablesWritten).
	tables        []uint64
	tablesWritten bool
	kick          chan struct{} // capacity 1: the log grew past checkpointBytes

	failOnce sync.Once
	failed   chan struct{}
	failErr  atomic.Value // error

	requests, commits, seq atomic.Uint64

	batchSizes  prometheus.Histogram // requests per commit
	syncSeconds prometheus.Histogram // log sync latency
	sessions    cachedCount          // the savepoint_sessions gauge (metrics.go)
	// markFull is set while the high-water mark cannot be written for lack
	// of space: writes are refused with core.ErrDiskFull (Store.markWritten).
	markFull atomic.Bool
}

// newEngine starts the engine of db after commit seq; w is the log (nil in
// memory), opened and marked.
func newEngine(db *badger.DB, dir string, reserve uint64, seq uint64, onCommit func(uint64), w *wal.Log) *engine {
	e := &engine{
		db: db, dir: dir, reserve: reserve,
		maxSize:    db.MaxBatchSize() - int64(len(seqKey)+8+entryOverhead),
		maxCount:   db.MaxBatchCount() - 1,
		threshold:  int(db.Opts().ValueThreshold),
		statfs:     freeBytes,
		sync:       func() error { return nil },
		badgerSync: db.Sync,
		wal:        w,
		onCommit:   onCommit,
		cache:      newRecordCache(),
		snaps:      newSnapshots(db.MaxVersion()),
		version:    db.MaxVersion(),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		failed:     make(chan struct{}),
		batchSizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "savepoint_store_commit_batch_requests",
			Help:    "Write requests folded into one commit and its sync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "savepoint_store_sync_seconds",
			Help:    "Time of the sync that makes one commit durable (the write-ahead log's fdatasync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}),
	}
	if w != nil {
		e.sync = w.Sync
		e.files = &dataFiles{dir: dir}
	}
	if faults.SkipSync {
		e.badgerSync = func() error { return nil }
	}
	e.seq.Store(seq)
	db.SetDiscardTs(e.version) // no reader yet: older versions are for compaction to drop
	if w != nil {
		e.wg.Add(1)
		go e.checkpointLoop()
	}
	return e
}

// commit writes ws atomically and returns once they are durable.
func (e *engine) commit(ws []write) error {
	o := &op{writes: ws, done: make(chan error, 1), logBytes: int64(commitPayloadSize(ws))}
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
	return e.send(context.Background(), o)
}

// runExclusive runs fn as the leader of a batch of its own, with no commit in progress, then
// checkpoints (fn changes Badger outside the log, so the log must not be
// replayed over it), and returns the first error.
func (e *engine) runExclusive(ctx context.Context, fn func() error) error {
	return e.send(ctx, &op{exclusive: func() error {
		if err := fn(); err != nil {
			return err
		}
		if err := e.checkpoint(true); err != nil {
			e.fail(fmt.Errorf("checkpoint: %w", err))
			return e.err()
		}
		return nil
	}, done: make(chan error, 1)})
}

// ping passes a request through the commit queue that writes and syncs
// nothing, so it fails when a commit is stuck past ctx's deadline, the
// store failed or is closed, and never for a full disk.
func (e *engine) ping(ctx context.Context) error {
	return e.send(ctx, &op{probe: true, done: make(chan error, 1)})
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
	if faults.AckBeforeSync {
		for _, o := range batch {
			o.done <- nil
		}
		time.Sleep(100 * time.Millisecond) // a window in which a kill loses acknowledged writes
		e.write(batch)
		return
	}
	err := e.err()
	if err == nil && e.markFull.Load() {
		err = fmt.Errorf("%w: the high-water mark file %s cannot be written for lack of space; free space to resume writes (reads keep working)",
			core.ErrDiskFull, HWMFile)
	}
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

// write commits batch: its record appended to the log and synced, then
// applied to Badger. A full disk met making a new segment refuses the batch
// and leaves the engine serving; every other failure is fatal.
func (e *engine) write(batch []*op) error {
	seq := e.seq.Load() + 1
	e.cache.forget(batch) // before Badger makes the batch visible
	version := e.version + 1
	var pos wal.Pos
	if e.wal != nil {
		var err error
		if pos, err = e.wal.AppendRecord(appendCommitPayload(e.wal.RecordBuf(), version, batch)); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("%w: %v; free space to resume writes (reads keep working)", core.ErrDiskFull, err)
			}
			e.cache.clear()
			e.fail(err)
			return e.err()
		}
	}
	start := time.Now()
	if err := e.sync(); err != nil {
		e.cache.clear()
		e.fail(fmt.Errorf("sync: %w", err))
		return e.err()
	}
	e.syncSeconds.Observe(time.Since(start).Seconds())
	ws := make([][]write, len(batch))
	for i, o := range batch {
		ws[i] = o.writes
	}
	if err := applyCommit(e.db, e.version, version, seq, ws); err != nil {
		e.cache.clear()
		e.fail(err)
		return e.err()
	}
	e.version = version
	e.cache.remember(batch, seq)
	e.db.SetDiscardTs(e.snaps.advance(version))
	e.seq.Store(seq) // after advance: a reader of seq reads at version or later (newTx)
	if e.wal != nil {
		e.wal.SetApplied(pos)
		if e.wal.SinceMark() >= checkpointBytes {
			select {
			case e.kick <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// applyCommit writes the commit seq of ws to db as one transaction at
// version, read at readTs, with the commit's sequence number; it does not
// sync. The engine applies each commit so after its log record is durable,
// and Open so again each record after the mark.
func applyCommit(db *badger.DB, readTs, version, seq uint64, ws [][]write) error {
	txn := db.NewTransactionAt(readTs, true)
	defer txn.Discard()
	for _, part := range ws {
		for _, w := range part {
			var err error
			if w.val == nil {
				err = txn.Delete(w.key)
			} else {
				err = txn.Set(w.key, w.val)
			}
			if err != nil {
				// Sized against the limits above, so this is not ErrTxnTooBig.
				return err
			}
		}
	}
	if err := txn.Set(seqKey, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return err
	}
	if err := txn.CommitAt(version, nil); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
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
