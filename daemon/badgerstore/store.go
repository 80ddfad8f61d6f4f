// Package badgerstore is the core.Store kept in a Badger database on local
// disk. A Store holds the database's directory lock from Open until Close.
package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/wal"
	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
)

// FormatVersion is the on-disk format this package writes. A data directory
// written in a newer format is refused at Open. Format 6 added the
// write-ahead log (wal/) in front of Badger and the graph threads' ledger;
// an older savepointd, which would neither replay the log nor know the
// ledger's records, refuses it.
const FormatVersion = 6

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("data directory is locked by another process")

// ErrFormat is returned by Open when the directory's format cannot be served.
var ErrFormat = errors.New("unsupported data format")

// ErrDamaged is returned by Open when Badger cannot open the directory: a
// table fails its checksum, or a file is missing or unreadable.
var ErrDamaged = errors.New("data directory cannot be opened")

// ErrBehind is returned by Open when the store holds fewer commits than its
// high-water mark records: acknowledged writes were lost.
var ErrBehind = errors.New("store is behind its high-water mark")

// Badger's sizing. A save writes its messages, its revision record (task,
// state, labels, pending tool uses), the session's head (task and labels
// again), a ledger entry per pending tool use (without its input) and a
// request record: at most core.MaxAppendMessages + core.MaxPendingToolUses
// + 3 records (1,259). Badger refuses a transaction over 15% of MemTableSize
// (1.2 MiB), but it counts a value of ValueThreshold bytes or more as a
// 12-byte pointer into the value log, where the value itself goes. So a
// transaction counts at most its keys plus its values under 512 bytes: 1,000
// messages of 138-byte keys (a 128-character session id), 256 ledger entries
// whose key and value hold the tool use id and name (under 131 + 1,002
// bytes together) and three more records, plus Badger's 2 bytes and the
// engine's 32-byte margin per entry: under 1 MiB (TestLargestSave writes the
// largest save, and a save of records just under the threshold). Memory: two
// memtables, each an arena of MemTableSize plus room for one transaction
// (10.4 MiB), the caches below (12 MiB) and a table builder's buffers (up to
// 4 MiB); messages and large states are read from the memory-mapped value
// log, which is file-backed. The retention pass reclaims the value log's
// space (collectValueLog, which deletes a rewritten file only once the
// moved values are synced).
const (
	MemTableSize     = 8 << 20
	ValueThreshold   = 512
	ValueLogFileSize = 64 << 20
	BlockCacheSize   = 8 << 20
	IndexCacheSize   = 4 << 20
	// MaxRequestBytes is the largest request the daemon may accept.
	MaxRequestBytes = 4 << 20
)

// In memory, Badger has no value log: a transaction of the largest request
// (under 4.4 MiB with its repeated task and labels) must fit 15% of the
// memtable, and Badger refuses a value over the threshold.
const (
	inMemoryMemTableSize   = 32 << 20
	inMemoryValueThreshold = 1 << 20
)

// DefaultDiskReserve is the free space writes need: Badger writes through
// memory-mapped files that it grows by up to two memtables' worth of
// write-ahead log and one value log file, and a write to such a file on a
// full disk kills the process with SIGBUS instead of returning an error
// (144 MiB).
const DefaultDiskReserve = 2*MemTableSize + ValueLogFileSize + 64<<20

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// Logger receives the store's and Badger's log lines; nil discards them.
	Logger *slog.Logger
	// InMemory keeps everything in memory, for tests; dir is ignored.
	InMemory bool
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// DiskReserve is the free space below which writes are refused with
	// core.ErrDiskFull; zero means DefaultDiskReserve.
	DiskReserve uint64
	// TombstoneRetention is how long a deleted session's tombstone is kept
	// after its records are purged; zero means DefaultTombstoneRetention.
	// A removed tombstone's epoch is kept in the store's epoch floor, so
	// fencing holds after it expires (purge.go).
	TombstoneRetention time.Duration
	// AcceptDataLoss opens a store that is behind its high-water mark,
	// logging what was lost, instead of refusing it.
	AcceptDataLoss bool
	// ExitAfterClose makes Close leave Badger's memtables in its synced
	// write-ahead log, for the next Open to replay, instead of flushing them
	// to tables: the process must exit after Close, since the database stays
	// open. A flush writes Badger's MANIFEST, and Badger v4.9.6 can leave a
	// store it no longer opens when that write fails; the replay is the path
	// a crash takes. False closes the database normally.
	ExitAfterClose bool
	// Retention is what the store removes by itself (retention.go); the
	// zero value removes nothing but still runs value-log GC every
	// DefaultMaintenanceInterval.
	Retention Retention
	// EncryptionKey, 16, 24 or 32 bytes (see ReadKeyFile), encrypts every
	// data file with AES; nil stores them in the clear. A directory is opened
	// only with the setting it was created with (ErrEncryptionKey).
	EncryptionKey []byte
}

// Store is a core.Store backed by Badger. Close it to release the
// directory lock.
type Store struct {
	db      *badger.DB
	eng     *engine
	openSeq uint64 // the last commit's sequence number at Open

	syncVlogs func() error // replaces syncValueLogs in tests
	hwm       *hwm         // nil in memory
	dirLock   *os.File     // holds the flock on LockFile; nil in memory
	log       *slog.Logger
	now       func() time.Time
	locks     [64]sync.Mutex // striped by session id: one writer per session
	keepLog   bool           // Options.ExitAfterClose
	graph     graphState     // the graph API's locks (graph.go)
	inMem     bool           // Options.InMemory: no value log to collect
	key       []byte         // Options.EncryptionKey: backups are encrypted with it

	retention time.Duration // Options.TombstoneRetention
	dir       string        // "" in memory

	damage     scrubFindings   // what the scrub found
	damagedIDs map[uint64]bool // tables the scrub found damaged; only the scrub's goroutine uses it

	readBytes atomic.Uint64 // Stats.WriteReadBytes
	cacheHits atomic.Uint64 // Stats.CacheHits

	stop chan struct{}  // closed by Close: background work ends
	bg   sync.WaitGroup // background work
}

var (
	_ core.Store = (*Store)(nil)
	_ core.Sizer = (*Store)(nil)
)

// openedHook, when set by a test, runs in Open once Badger is open and
// verified, before the store replays its log and starts its engine.
var openedHook func(*badger.DB)

// Open opens or creates the store in dir, migrating an older format. It
// fails with ErrLocked when another process has the directory open, with
// ErrFormat when the directory holds a newer or unknown format, and with
// ErrBehind when acknowledged commits are missing (unless AcceptDataLoss).
func Open(dir string, opts Options) (*Store, error) {
	s := &Store{log: opts.Logger, now: opts.Now, keepLog: opts.ExitAfterClose, stop: make(chan struct{}), damagedIDs: map[uint64]bool{},
		inMem: opts.InMemory, key: opts.EncryptionKey}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.DiskReserve == 0 {
		opts.DiskReserve = DefaultDiskReserve
	}
	if s.retention = opts.TombstoneRetention; s.retention == 0 {
		s.retention = DefaultTombstoneRetention
	}
	bopts := badger.DefaultOptions(dir).
		WithSyncWrites(false). // the engine syncs once per commit
		WithDetectConflicts(false).
		WithLogger(badgerLogger{s.log}).
		WithInMemory(opts.InMemory).
		WithMemTableSize(MemTableSize).
		WithNumMemtables(2).
		WithValueThreshold(ValueThreshold).
		WithValueLogFileSize(valueLogFileSize).
		WithBlockCacheSize(BlockCacheSize).
		WithIndexCacheSize(IndexCacheSize).
		WithNumCompactors(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithChecksumVerificationMode(options.NoVerification) // verifyTables does it
	if len(opts.EncryptionKey) > 0 {
		bopts = bopts.WithEncryptionKey(opts.EncryptionKey)
		if bopts.IndexCacheSize == 0 {
			bopts = bopts.WithIndexCacheSize(8 << 20) // Badger requires an index cache with encryption
		}
	}
	if opts.InMemory {
		// No value log: every value stays in the memtables, so they are
		// sized for the largest request as a whole.
		bopts = bopts.WithMemTableSize(inMemoryMemTableSize).WithValueThreshold(inMemoryValueThreshold)
		bopts.Dir, bopts.ValueDir, dir = "", "", ""
	} else {
		f, err := LockDir(dir)
		if err != nil {
			return nil, err
		}
		s.dirLock = f
	}
	if dir != "" {
		if err := CheckEncryptionKey(dir, opts.EncryptionKey); err != nil {
			s.unlockDir()
			return nil, err
		}
		if err := s.removeEmptyLogs(dir); err != nil {
			s.unlockDir()
			return nil, err
		}
		if err := listNoTables(dir); err != nil {
			s.unlockDir()
			return nil, fmt.Errorf("write %s: %w", TablesFile, err)
		}
	}
	db, err := badger.OpenManaged(bopts)
	if err != nil && dir != "" {
		// A MANIFEST naming tables that never held data alone: heal it
		// (manifest_heal.go).
		if healed, herr := healManifest(dir); herr != nil {
			s.log.Error("healing the MANIFEST", "err", herr)
		} else if len(healed) > 0 {
			s.log.Warn("removed the MANIFEST records of missing tables that never held data alone: a failed flush, or a power cut during one (docs/reliability.md)",
				"tables", strings.Join(healed, ","), "err", err)
			db, err = badger.OpenManaged(bopts)
		}
	}
	if err != nil {
		s.unlockDir()
		return nil, fmt.Errorf("%w: Badger cannot open %s: %v. %s", ErrDamaged, dir, err, openAdvice(dir))
	}
	// Badger's compactors start inside OpenManaged with a discard timestamp
	// of 0, and a compaction run with it keeps every version it merges until
	// those tables are compacted again. No reader needs a version older than
	// the newest yet (the engine advances the timestamp past the log's
	// replay), so it is set before the verification and the replay; what is
	// left of the window is OpenManaged's own tail, and a compactor waits
	// 50 ms or more after it starts before its first compaction.
	db.SetDiscardTs(db.MaxVersion())
	if err := verifyAtOpen(db, dir); err != nil {
		// The database is left open: closing it could trip on the same
		// damage. The caller is expected to exit.
		s.unlockDir()
		return nil, fmt.Errorf("%w: %s: %v. Restore the directory from a backup, or move it aside to start empty", ErrDamaged, dir, err)
	}
	s.db, s.dir = db, dir
	if openedHook != nil {
		openedHook(db)
	}
	if err := s.start(dir, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// start opens the write-ahead log and replays it into Badger, checks that
// Badger then holds every commit the log and the high-water mark know of,
// recovers the moves of an interrupted value-log GC, starts the engine,
// and migrates.
func (s *Store) start(dir string, opts Options) error {
	seq, err := readSeq(s.db)
	if err != nil && !errors.Is(err, errNoSeq) {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	var w *wal.Log
	if dir != "" {
		var res wal.Opened
		if w, res, err = s.replayLog(dir, seq); err != nil {
			return err
		}
		if seq, err = s.checkBehind(dir, seq, res, opts.AcceptDataLoss); err == nil {
			err = s.markLog(w, res.End, seq)
		}
		if err == nil {
			err = s.recoverMoves(dir, opts.EncryptionKey)
		}
		if err != nil {
			w.Close()
			return err
		}
		s.hwm = newHWM(dir, seq)
	}
	onCommit := func(uint64) {}
	if s.hwm != nil {
		onCommit = s.hwm.latest.Store
	}
	s.openSeq = seq
	s.eng = newEngine(s.db, dir, opts.DiskReserve, seq, onCommit, w)
	if s.hwm != nil {
		s.hwm.lock = &s.eng.ckptMu
		s.hwm.start(s.markWritten)
	}
	if err := s.migrate(); err != nil {
		return err
	}
	if err := s.finishPurges(); err != nil {
		return err
	}
	if err := s.finishGraph(); err != nil {
		return err
	}
	if dir != "" {
		s.bg.Go(s.scrubLoop)
	}
	s.bg.Go(func() { s.maintainEvery(opts.Retention) })
	return nil
}

// removeEmptyLogs deletes memtable logs (.mem) and value-log files (.vlog)
// of zero bytes, which Badger refuses to open ("Create a new file") and
// which hold nothing. Badger deletes such a file by truncating it to zero
// and then removing it, so a process that ends between the two (a kill, or
// savepointd's exit without a flush) leaves one; and a power cut after a
// directory sync made a new file's entry durable, before anything synced
// its data, leaves one too (its size was never made durable).
func (s *Store) removeEmptyLogs(dir string) error {
	var logs []string
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		logs = append(logs, names...)
	}
	for _, p := range logs {
		if fi, err := os.Stat(p); err == nil && fi.Size() == 0 {
			s.log.Info("removing an empty log file left by an interrupted delete or a power cut", "file", p)
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// verifyTables checks every block of every table against its checksum, as
// Badger's OnTableRead mode would at open, but in this goroutine: on some
// damage Badger's check dereferences a nil block (table.go:711 in v4.9.6),
// and here that panic can be recovered and reported.
func verifyTables(db *badger.DB) (err error) {
	defer func() {
		if p := recover(); p != nil {
			var files []string
			for _, t := range db.Tables() {
				files = append(files, table.IDToFilename(t.ID))
			}
			err = fmt.Errorf("one of the tables %s is damaged: Badger's checksum verification failed with %v", strings.Join(files, ", "), p)
		}
	}()
	return db.VerifyChecksum()
}

// LockFile is the file in the data directory whose flock marks a live owner.
const LockFile = "savepointd.lock"

// LockDir takes the flock of LockFile in dir, creating dir when missing, so
// that one process at a time owns the directory; closing the returned file
// releases it. A lock held elsewhere is ErrLocked, naming the file.
func LockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held; stop the other savepointd using %s first", ErrLocked, path, dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func (s *Store) unlockDir() {
	if s.dirLock != nil {
		s.dirLock.Close() // closing the descriptor releases the flock
		s.dirLock = nil
	}
}

// Close stops the engine, records the high-water mark, closes the database
// and then releases the directory lock. After a storage failure it leaves
// the database as it is, for the next Open to replay its synced log: closing
// would flush memtables onto the failing disk, and a failed write of Badger's
// MANIFEST there can leave a store that no longer opens.
func (s *Store) Close() error {
	close(s.stop)
	s.bg.Wait()
	if s.eng != nil {
		s.eng.close()
		if err := s.eng.err(); err != nil {
			s.unlockDir()
			return err
		}
	}
	if s.hwm != nil {
		s.hwm.close()
	}
	if s.keepLog {
		s.unlockDir() // every commit was synced by the engine
		return nil
	}
	err := s.db.Close()
	if err == nil && s.dir != "" {
		// Badger flushed its memtables into tables and synced the
		// directory: every table its MANIFEST names is durable.
		var ids []uint64
		if ids, err = manifestTables(s.dir); err == nil {
			err = writeTables(s.dir, ids)
		}
	}
	s.unlockDir()
	return err
}

// markWritten applies the outcome of a high-water mark write, which keeps
// the check against a store rolled back behind its acknowledged commits:
// a full disk (ENOSPC) refuses writes with core.ErrDiskFull until a later
// write of the mark succeeds, reads still served; any other failure is
// fatal, as a failed sync is.
func (s *Store) markWritten(err error) {
	switch {
	case err == nil:
		if s.eng.markFull.Swap(false) {
			s.log.Info("the high-water mark is written again; writes resume", "file", HWMFile)
		}
	case errors.Is(err, syscall.ENOSPC):
		if !s.eng.markFull.Swap(true) {
			s.log.Error("write high-water mark: no space; writes are refused with DISK_FULL until it can be written (reads keep working)", "err", err)
		}
	default:
		s.log.Error("write high-water mark: the store stops acknowledging writes", "err", err)
		s.eng.fail(fmt.Errorf("writing the high-water mark %s: %w", HWMFile, err))
	}
}

// Failed is closed when a commit or sync has failed: the store acknowledges
// no more writes, and the process should exit so its supervisor restarts it.
func (s *Store) Failed() <-chan struct{} { return s.eng.failed }

// Err returns the failure that closed Failed, or nil.
func (s *Store) Err() error { return s.eng.err() }

// Ping returns nil once a request has passed through the commit queue,
// which it does without writing; it fails when the store is closed or
// failed, or a commit in progress does not end before ctx is done. A full
// disk does not fail it.
func (s *Store) Ping(ctx context.Context) error { return s.eng.ping(ctx) }

// Info returns the store's kind, "badger", FormatVersion, its data
// directory ("(in memory)" without one), the commits since Open and the
// sequence number of the last commit found at Open.
func (s *Store) Info() core.StoreInfo {
	loc := "(in memory)"
	if s.eng.dir != "" {
		loc = s.eng.dir
	}
	return core.StoreInfo{Kind: "badger", Format: FormatVersion, Location: loc, Commits: s.eng.commits.Load(), LastCommit: s.openSeq}
}

// Size returns the disk space the store's files take (tables, value log,
// write-ahead log), or in memory what Badger reports it holds.
func (s *Store) Size(context.Context) (int64, error) {
	if s.eng.dir == "" {
		lsm, vlog := s.eng.db.Size()
		return lsm + vlog, nil
	}
	var n int64
	for _, glob := range []string{"*.sst", "*.vlog", "*.mem", filepath.Join(WALDir, "*.seg"), filepath.Join(WALDir, "spare-*")} {
		n += globBytes(s.eng.dir, glob)
	}
	return n, nil
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := s.eng.stats()
	st.WriteReadBytes = s.readBytes.Load()
	st.DamagedTables = s.damage.tables.Load()
	st.CacheHits = s.cacheHits.Load()
	return st
}

// update runs fn on a snapshot and commits its writes through the engine,
// durably. Every write of the store goes through here.
func (s *Store) update(fn func(t *tx) error) error {
	t := s.newTx()
	defer s.closeTx(t)
	err := fn(t)
	s.readBytes.Add(uint64(t.readBytes))
	s.cacheHits.Add(uint64(t.cacheHits))
	if err != nil || len(t.writes) == 0 {
		return err
	}
	if err := t.indexUpdates(); err != nil {
		return err
	}
	return s.eng.commit(t.writes)
}

func (s *Store) view(ctx context.Context, fn func(t *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.eng.err(); err != nil {
		return err
	}
	t := s.newTx()
	defer s.closeTx(t)
	err := fn(t)
	s.cacheHits.Add(uint64(t.cacheHits))
	return err
}

// newTx starts a transaction on a snapshot of the last durable commit; the
// caller ends it with closeTx. The sequence number is read first, so every
// commit it covers is in the snapshot.
func (s *Store) newTx() *tx {
	seq := s.eng.seq.Load()
	return &tx{r: s.readTxn(), findings: &s.damage, cache: s.eng.cache, seq: seq}
}

func (s *Store) closeTx(t *tx) { s.discardReadTxn(t.r) }

// readTxn returns a read-only Badger transaction at the version of the last
// durable commit, which Badger keeps readable until discardReadTxn ends it.
func (s *Store) readTxn() *badger.Txn {
	return s.db.NewTransactionAt(s.eng.snaps.open(), false)
}

func (s *Store) discardReadTxn(txn *badger.Txn) {
	txn.Discard()
	s.eng.snaps.close(txn.ReadTs())
}

func (s *Store) lock(sessionID string) func() {
	h := fnv.New32a()
	h.Write([]byte(sessionID))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// badgerLogger sends Badger's log lines to slog, Badger's info lines at
// debug level. A line below the logger's level is not formatted: Badger
// logs a few debug lines per write.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	if b.l.Enabled(context.Background(), level) {
		b.l.Log(context.Background(), level, "badger: "+fmt.Sprintf(f, a...))
	}
}
