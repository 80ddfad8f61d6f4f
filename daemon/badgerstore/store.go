// Package badgerstore is the daemon.Store kept in a Badger database on local
// disk. A Store holds the database's directory lock from Open until Close.
package badgerstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// FormatVersion is the on-disk format this package writes. A data directory
// written in a newer format is refused at Open.
const FormatVersion = 3

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
// again), a call record per pending tool use (without its input) and a
// request record: at most daemon.MaxAppendMessages + daemon.MaxPendingToolUses
// + 3 records (1,259). Badger refuses a transaction over 15% of MemTableSize
// (1.2 MiB), but it counts a value of ValueThreshold bytes or more as a
// 12-byte pointer into the value log, where the value itself goes. So a
// transaction counts at most its keys plus its values under 512 bytes: 1,000
// messages of 138-byte keys (a 128-character session id), 256 call records
// whose key and value hold the tool use id and name (under 131 + 1,002
// bytes together) and three more records, plus Badger's 2 bytes and the
// engine's 32-byte margin per entry: under 1 MiB (TestLargestSave writes the
// largest save, and a save of records just under the threshold). Memory: two
// memtables, each an arena of MemTableSize plus room for one transaction
// (10.4 MiB), the caches below (12 MiB) and a table builder's buffers (up to
// 4 MiB); messages and large states are read from the memory-mapped value
// log, which is file-backed. The value log's space is not reclaimed while
// savepointd runs (docs/benchmarks.md, "Memory").
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
	// daemon.ErrDiskFull; zero means DefaultDiskReserve.
	DiskReserve uint64
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
}

// Store is a daemon.Store backed by Badger. Close it to release the
// directory lock.
type Store struct {
	db      *badger.DB
	eng     *engine
	hwm     *hwm     // nil in memory
	dirLock *os.File // holds the flock on LockFile; nil in memory
	log     *slog.Logger
	now     func() time.Time
	locks   [64]sync.Mutex // striped by session id: one writer per session
	keepLog bool           // Options.ExitAfterClose
}

var _ daemon.Store = (*Store)(nil)

// Open opens or creates the store in dir, migrating an older format. It
// fails with ErrLocked when another process has the directory open, with
// ErrFormat when the directory holds a newer or unknown format, and with
// ErrBehind when acknowledged commits are missing (unless AcceptDataLoss).
func Open(dir string, opts Options) (*Store, error) {
	s := &Store{log: opts.Logger, now: opts.Now, keepLog: opts.ExitAfterClose}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.DiskReserve == 0 {
		opts.DiskReserve = DefaultDiskReserve
	}
	bopts := badger.DefaultOptions(dir).
		WithSyncWrites(false). // the engine syncs once per commit
		WithDetectConflicts(false).
		WithLogger(badgerLogger{s.log}).
		WithInMemory(opts.InMemory).
		WithMemTableSize(MemTableSize).
		WithNumMemtables(2).
		WithValueThreshold(ValueThreshold).
		WithValueLogFileSize(ValueLogFileSize).
		WithBlockCacheSize(BlockCacheSize).
		WithIndexCacheSize(IndexCacheSize).
		WithNumCompactors(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithChecksumVerificationMode(options.NoVerification) // verifyTables does it
	if opts.InMemory {
		// No value log: every value stays in the memtables, so they are
		// sized for the largest request as a whole.
		bopts = bopts.WithMemTableSize(inMemoryMemTableSize).WithValueThreshold(inMemoryValueThreshold)
		bopts.Dir, bopts.ValueDir, dir = "", "", ""
	} else {
		f, err := lockDir(dir)
		if err != nil {
			return nil, err
		}
		s.dirLock = f
	}
	if dir != "" {
		if err := s.removeEmptyWALs(dir); err != nil {
			s.unlockDir()
			return nil, err
		}
	}
	db, err := badger.Open(bopts)
	if err != nil {
		s.unlockDir()
		return nil, fmt.Errorf("%w: Badger cannot open %s: %v. If it names a table file that does not exist, "+
			"'savepointd repair-manifest' may recover it (docs/reliability.md); otherwise restore the directory from a backup, or move it aside to start empty",
			ErrDamaged, dir, err)
	}
	if err := verifyTables(db); err != nil {
		// The database is left open: closing it could trip on the same
		// damage. The caller is expected to exit.
		s.unlockDir()
		return nil, fmt.Errorf("%w: %s: %v. Restore the directory from a backup, or move it aside to start empty", ErrDamaged, dir, err)
	}
	s.db = db
	if err := s.start(dir, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// start checks the high-water mark, starts the engine, and migrates.
func (s *Store) start(dir string, opts Options) error {
	seq, err := readSeq(s.db)
	if err != nil && !errors.Is(err, errNoSeq) {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if dir != "" {
		mark, found, err := readHWM(dir)
		if err != nil {
			return err
		}
		if found && seq < mark {
			if !opts.AcceptDataLoss {
				return fmt.Errorf("%w: the data in %s ends at commit %d but commit %d was acknowledged; "+
					"commits %d to %d are lost. Restore a backup, or start with --accept-data-loss to serve what is left",
					ErrBehind, dir, seq, mark, seq+1, mark)
			}
			s.log.Error("serving a store behind its high-water mark: acknowledged commits are lost",
				"data_dir", dir, "last_commit", seq, "high_water_mark", mark, "lost_commits", mark-seq)
			if err := writeHWM(dir, seq); err != nil {
				return err
			}
		}
		s.hwm = startHWM(dir, seq, func(err error) { s.log.Error("write high-water mark", "err", err) })
	}
	onCommit := func(uint64) {}
	if s.hwm != nil {
		onCommit = s.hwm.latest.Store
	}
	s.eng = newEngine(s.db, dir, opts.DiskReserve, seq, onCommit)
	if err := s.migrate(); err != nil {
		return err
	}
	return s.finishPurges()
}

// removeEmptyWALs deletes write-ahead log files of zero bytes. Badger
// deletes a flushed memtable's log by truncating it to zero and then
// removing it; a process that ends between the two (a kill, or savepointd's
// exit without a flush) leaves an empty file that Badger then refuses to
// open ("Create a new file"). An empty log holds nothing to replay.
func (s *Store) removeEmptyWALs(dir string) error {
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	for _, p := range mems {
		if fi, err := os.Stat(p); err == nil && fi.Size() == 0 {
			s.log.Info("removing an empty write-ahead log file left by an interrupted delete", "file", p)
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

func lockDir(dir string) (*os.File, error) {
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
	s.unlockDir()
	return err
}

// Failed is closed when a commit or sync has failed: the store acknowledges
// no more writes, and the process should exit so its supervisor restarts it.
func (s *Store) Failed() <-chan struct{} { return s.eng.failed }

// Err returns the failure that closed Failed, or nil.
func (s *Store) Err() error { return s.eng.err() }

// Stats returns the engine's counters.
func (s *Store) Stats() Stats { return s.eng.stats() }

// migrate brings an older format up to FormatVersion. Format 1 had no commit
// sequence number; every commit now writes one, so its migration is the
// commit of the new format record.
func (s *Store) migrate() error {
	var version uint32
	var empty bool
	err := s.view(context.Background(), func(t *tx) error {
		var rec storagev1.FormatRecord
		found, err := get(t, nil, "", formatKey, &rec)
		if err != nil {
			return fmt.Errorf("%w: format record: %v", ErrFormat, err)
		}
		if !found {
			it := t.r.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			it.Rewind()
			if empty = !it.Valid(); !empty {
				return fmt.Errorf("%w: the directory holds data but no format version", ErrFormat)
			}
		}
		version = rec.GetVersion()
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case version > FormatVersion:
		return fmt.Errorf("%w: the directory is in format %d, this savepointd reads up to %d; run a newer savepointd",
			ErrFormat, version, FormatVersion)
	case version == FormatVersion:
		return nil
	case !empty:
		s.log.Info("migrating the data directory", "from_format", version, "to_format", FormatVersion)
	}
	if err := s.moveRequestIDs(); err != nil {
		return fmt.Errorf("migrate to format %d: %w", FormatVersion, err)
	}
	return s.update(func(t *tx) error {
		return put(t, formatKey, &storagev1.FormatRecord{Version: FormatVersion})
	})
}

// moveRequestIDs is the migration to format 3: each request id kept in a
// session's head moves to its own record, a session per commit. It can be
// interrupted and run again: a moved head no longer holds any.
func (s *Store) moveRequestIDs() error {
	sids, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool {
		return len(h.RecentRequests) > 0 //nolint:staticcheck // reading the old format
	})
	if err != nil {
		return err
	}
	for _, sid := range sids {
		err := s.update(func(t *tx) error {
			var h storagev1.SessionRecord
			if _, err := get(t, nil, sid, sessionKey(sid), &h); err != nil {
				return err
			}
			for _, r := range h.RecentRequests { //nolint:staticcheck // reading the old format
				if err := put(t, requestKey(sid, r.RequestId), r); err != nil {
					return err
				}
			}
			h.RecentRequests = nil //nolint:staticcheck // clearing the old format
			return put(t, sessionKey(sid), &h)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// update runs fn on a snapshot and commits its writes through the engine,
// durably. Every write of the store goes through here.
func (s *Store) update(fn func(t *tx) error) error {
	t := &tx{r: s.db.NewTransaction(false)}
	defer t.r.Discard()
	if err := fn(t); err != nil {
		return err
	}
	if len(t.writes) == 0 {
		return nil
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
	t := &tx{r: s.db.NewTransaction(false)}
	defer t.r.Discard()
	return fn(t)
}

func (s *Store) lock(sessionID string) func() {
	h := fnv.New32a()
	h.Write([]byte(sessionID))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

func put(t *tx, key []byte, m proto.Message) error {
	v, err := encodeValue(key, m)
	if err != nil {
		return err
	}
	t.set(key, v)
	return nil
}

// get reads key into m; found is false when the key is absent. A value that
// fails its checksum or does not decode is daemon.ErrCorrupt.
//
// h is the session's head when it is known, so that the error can carry the
// session's revision and epoch (a client needs the epoch to delete it).
func get(t *tx, h *storagev1.SessionRecord, sessionID string, key []byte, m proto.Message) (found bool, err error) {
	v, found, err := t.get(key)
	if err != nil || !found {
		return false, err
	}
	if err := decodeValue(key, v, m); err != nil {
		return false, corrupt(h, sessionID, err)
	}
	return true, nil
}

func corrupt(h *storagev1.SessionRecord, sessionID string, err error) error {
	msg := fmt.Sprintf("session %q: stored data cannot be decoded (%v) and can no longer be trusted; "+
		"read what you can with GetSession and delete it with DeleteSession", sessionID, err)
	if h == nil {
		return fmt.Errorf("%w: %s", daemon.ErrCorrupt, msg)
	}
	return &daemon.StateError{Err: daemon.ErrCorrupt, Msg: msg, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch}
}

// head returns the session's record, or nil when it does not exist or is a
// tombstone; tomb returns the tombstone.
func head(t *tx, sessionID string) (live, tomb *storagev1.SessionRecord, err error) {
	var rec storagev1.SessionRecord
	found, err := get(t, nil, sessionID, sessionKey(sessionID), &rec)
	if err != nil || !found {
		return nil, nil, err
	}
	if rec.Deleted {
		return nil, &rec, nil
	}
	return &rec, nil, nil
}

func mustHead(t *tx, sessionID string) (*storagev1.SessionRecord, error) {
	h, _, err := head(t, sessionID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: session %q: nothing to resume from; create it with SaveCheckpoint and expected_revision 0",
			daemon.ErrSessionNotFound, sessionID)
	}
	return h, nil
}

// fence rejects an epoch that is not the owner's: older than the session's,
// newer than it, or 0 once the session has been resumed.
func fence(h *storagev1.SessionRecord, sessionID string, epoch uint64) error {
	if epoch == h.Epoch || (epoch == 0 && !h.Resumed) {
		return nil
	}
	msg := fmt.Sprintf("session %q is owned by epoch %d, not %d: another process has taken it over (by Resume, or by deleting and re-creating it); stop writing to it",
		sessionID, h.Epoch, epoch)
	if epoch == 0 {
		msg = fmt.Sprintf("session %q has been resumed (epoch %d); epoch 0 is accepted only before the first Resume",
			sessionID, h.Epoch)
	}
	return &daemon.StateError{Err: daemon.ErrSessionFenced, Msg: msg, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch}
}

func (s *Store) SaveCheckpoint(ctx context.Context, req *daemon.SaveRequest) (daemon.SaveResult, error) {
	if err := ctx.Err(); err != nil {
		return daemon.SaveResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res daemon.SaveResult
	err := s.update(func(t *tx) error {
		var err error
		res, err = s.save(t, req)
		return err
	})
	return res, err
}

func (s *Store) save(t *tx, req *daemon.SaveRequest) (daemon.SaveResult, error) {
	sid := req.SessionID
	h, tomb, err := head(t, sid)
	if err != nil {
		return daemon.SaveResult{}, err
	}
	var fp []byte // the payload's digest, only for a save with a request id
	if req.RequestID != "" {
		fp = req.Fingerprint()
	}

	// (1) request id: a retry returns the original response. Every save's id
	// is remembered for the life of the session.
	if h != nil && req.RequestID != "" {
		var r storagev1.RequestRecord
		found, err := get(t, h, sid, requestKey(sid, req.RequestID), &r)
		if err != nil {
			return daemon.SaveResult{}, err
		}
		if found {
			if string(r.Fingerprint) != string(fp) {
				return daemon.SaveResult{}, fmt.Errorf("%w: request id %s was already used for a different save of session %q; make a new id for a new save",
					daemon.ErrRequestIDReused, req.RequestID, sid)
			}
			return daemon.SaveResult{Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch}, nil
		}
	}

	// (2) epoch, then (3) revision.
	var prev storagev1.RevisionRecord
	now := timestamppb.New(s.now())
	switch {
	case h != nil:
		if err := fence(h, sid, req.Epoch); err != nil {
			return daemon.SaveResult{}, err
		}
		if req.ExpectedRevision == 0 {
			return daemon.SaveResult{}, &daemon.StateError{Err: daemon.ErrSessionExists, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q exists at revision %d; resume it, or delete it to start over", sid, h.Revision)}
		}
		if req.ExpectedRevision != h.Revision {
			return daemon.SaveResult{}, &daemon.StateError{Err: daemon.ErrRevisionMismatch, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is at revision %d, not %d; reload it before saving", sid, h.Revision, req.ExpectedRevision)}
		}
		found, err := get(t, h, sid, revisionKey(sid, h.Revision), &prev)
		if err != nil {
			return daemon.SaveResult{}, err
		}
		if !found {
			return daemon.SaveResult{}, corrupt(h, sid, fmt.Errorf("revision %d is missing", h.Revision))
		}
	case req.ExpectedRevision != 0:
		return daemon.SaveResult{}, fmt.Errorf("%w: session %q does not exist; create it with expected_revision 0",
			daemon.ErrSessionNotFound, sid)
	default: // create, possibly over a tombstone
		h = &storagev1.SessionRecord{Epoch: 1, CreateTime: now}
		if tomb != nil {
			if req.Epoch != 0 && req.Epoch <= tomb.Epoch {
				return daemon.SaveResult{}, &daemon.StateError{Err: daemon.ErrSessionFenced, CurrentEpoch: tomb.Epoch,
					Msg: fmt.Sprintf("session %q was deleted at epoch %d; epoch %d is stale", sid, tomb.Epoch, req.Epoch)}
			}
			h.Epoch = tomb.Epoch + 1
		}
	}

	// History: keep a prefix of the previous revision's segments, then append.
	count := prev.MessageCount
	keep := count
	if req.KeepMessages != nil {
		keep = *req.KeepMessages
		if keep > count {
			return daemon.SaveResult{}, &daemon.StateError{Err: daemon.ErrKeepOutOfRange, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("keep_messages %d is beyond the %d stored messages of session %q", keep, count, sid)}
		}
	}
	segments := truncateSegments(prev.Segments, keep)
	if n := uint64(len(req.AppendMessages)); n > 0 {
		first := h.NextSeq
		for i, m := range req.AppendMessages {
			key := messageKey(sid, first+uint64(i))
			if err := put(t, key, &savepointv1.Message{Role: m.Role, ContentJson: m.ContentJSON}); err != nil {
				return daemon.SaveResult{}, err
			}
		}
		h.NextSeq += n
		if last := len(segments) - 1; last >= 0 && segments[last].FirstSeq+segments[last].Count == first {
			segments[last] = &storagev1.Segment{FirstSeq: segments[last].FirstSeq, Count: segments[last].Count + n}
		} else {
			segments = append(segments, &storagev1.Segment{FirstSeq: first, Count: n})
		}
	}
	newCount := keep + uint64(len(req.AppendMessages))
	rev := h.Revision + 1

	// Pending tool uses: refuse one already recorded; remember each call.
	pending := make([]*savepointv1.ToolUse, 0, len(req.PendingToolUses))
	for _, u := range req.PendingToolUses {
		tu := daemon.ToolUseToProto(u)
		var call storagev1.CallRecord
		key := callKey(sid, u.ID)
		if _, err := get(t, h, sid, key, &call); err != nil {
			return daemon.SaveResult{}, err
		}
		if call.Effect != nil {
			return daemon.SaveResult{}, &daemon.StateError{Err: daemon.ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; append its result instead of making it pending again", u.ID)}
		}
		// The revision keeps the whole tool use; the call record needs only
		// what RecordEffect checks, so a large input is not stored twice.
		call.ToolUse = &savepointv1.ToolUse{ToolUseId: tu.ToolUseId, Name: tu.Name, EffectClass: tu.EffectClass, BeginTracked: tu.BeginTracked}
		call.LastPendingRevision = rev
		if err := put(t, key, &call); err != nil {
			return daemon.SaveResult{}, err
		}
		pending = append(pending, tu)
	}

	rec := &storagev1.RevisionRecord{
		Revision:        rev,
		Epoch:           h.Epoch,
		Task:            req.Task,
		Turn:            req.Turn,
		TokensUsed:      req.TokensUsed,
		Segments:        segments,
		MessageCount:    newCount,
		PendingToolUses: pending,
		StateJson:       req.StateJSON,
		Labels:          req.Labels,
		SaveTime:        now,
	}
	if err := put(t, revisionKey(sid, rev), rec); err != nil {
		return daemon.SaveResult{}, err
	}

	res := daemon.SaveResult{Revision: rev, MessageCount: newCount, Epoch: h.Epoch}
	h.Revision = rev
	h.UpdateTime = now
	h.Task, h.Turn, h.MessageCount = req.Task, req.Turn, newCount
	h.PendingToolUseCount = uint32(len(pending))
	h.Labels = req.Labels
	if req.RequestID != "" {
		if err := put(t, requestKey(sid, req.RequestID), &storagev1.RequestRecord{
			RequestId: req.RequestID, Fingerprint: fp, Revision: res.Revision, MessageCount: res.MessageCount, Epoch: res.Epoch,
		}); err != nil {
			return daemon.SaveResult{}, err
		}
	}
	return res, put(t, sessionKey(sid), h)
}

// truncateSegments returns the segments covering the first keep messages, as
// a new slice: the previous revision's record is never changed.
func truncateSegments(segs []*storagev1.Segment, keep uint64) []*storagev1.Segment {
	out := make([]*storagev1.Segment, 0, len(segs)+1)
	for _, sg := range segs {
		if keep == 0 {
			break
		}
		n := min(sg.Count, keep)
		out = append(out, &storagev1.Segment{FirstSeq: sg.FirstSeq, Count: n})
		keep -= n
	}
	return out
}

func (s *Store) BeginEffect(ctx context.Context, sessionID, toolUseID string, epoch uint64) (daemon.BeginResult, error) {
	if err := ctx.Err(); err != nil {
		return daemon.BeginResult{}, err
	}
	defer s.lock(sessionID)()
	var res daemon.BeginResult
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		if err := fence(h, sessionID, epoch); err != nil {
			return err
		}
		var call storagev1.CallRecord
		key := callKey(sessionID, toolUseID)
		found, err := get(t, h, sessionID, key, &call)
		if err != nil {
			return err
		}
		if !found || call.LastPendingRevision != h.Revision {
			return &daemon.StateError{Err: daemon.ErrCallNotPending, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q is not pending in revision %d of session %q; save it as pending at Point A first", toolUseID, h.Revision, sessionID)}
		}
		if call.Effect != nil {
			return &daemon.StateError{Err: daemon.ErrCallAlreadyRecorded, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("tool use %q already has a recorded effect; reuse it instead of running the tool again", toolUseID)}
		}
		if call.Begun {
			res = daemon.BeginResult{IdempotencyKey: call.IdempotencyKey, AlreadyBegun: true}
			return nil
		}
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		call.Begun = true
		call.IdempotencyKey = hex.EncodeToString(b[:])
		call.BeginTime = timestamppb.New(s.now())
		res = daemon.BeginResult{IdempotencyKey: call.IdempotencyKey}
		return put(t, key, &call)
	})
	return res, err
}

func (s *Store) RecordEffect(ctx context.Context, sessionID string, e daemon.Effect) (daemon.Effect, bool, error) {
	if err := ctx.Err(); err != nil {
		return daemon.Effect{}, false, err
	}
	defer s.lock(sessionID)()
	var stored daemon.Effect
	var already bool
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		var call storagev1.CallRecord
		key := callKey(sessionID, e.ToolUseID)
		found, err := get(t, h, sessionID, key, &call)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: tool use %q was never pending in session %q; save it as pending at Point A before recording its effect",
				daemon.ErrCallUnknown, e.ToolUseID, sessionID)
		}
		if e.Name == "" {
			e.Name = call.ToolUse.GetName()
		}
		if e.Name != call.ToolUse.GetName() {
			return fmt.Errorf("%w: tool use %q is a call of %q, not %q", daemon.ErrToolNameMismatch, e.ToolUseID, call.ToolUse.GetName(), e.Name)
		}
		if call.Effect != nil {
			stored = daemon.EffectFromProto(call.Effect)
			if !stored.SameOutcome(e) {
				return &daemon.StateError{Err: daemon.ErrEffectConflict, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
					Msg: fmt.Sprintf("tool use %q already has a different recorded effect; the first record stands", e.ToolUseID)}
			}
			already = true
			return nil
		}
		e.RecordTime = s.now()
		e.Late = call.LastPendingRevision != h.Revision
		call.Effect = daemon.EffectToProto(e)
		stored = e
		return put(t, key, &call)
	})
	return stored, already, err
}

func (s *Store) Resume(ctx context.Context, sessionID string) (daemon.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return daemon.Checkpoint{}, err
	}
	defer s.lock(sessionID)()
	var cp daemon.Checkpoint
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		// Read the revision first: a session that cannot be read is not resumed.
		if cp, err = checkpoint(t, sessionID, h, 0); err != nil {
			return err
		}
		h.Epoch++
		h.Resumed = true
		cp.Epoch = h.Epoch
		return put(t, sessionKey(sessionID), h)
	})
	return cp, err
}

func (s *Store) Checkpoint(ctx context.Context, sessionID string, revision uint64) (daemon.Checkpoint, error) {
	var cp daemon.Checkpoint
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		cp, err = checkpoint(t, sessionID, h, revision)
		return err
	})
	return cp, err
}

func revision(t *tx, sessionID string, h *storagev1.SessionRecord, rev uint64) (*storagev1.RevisionRecord, error) {
	if rev == 0 {
		rev = h.Revision
	}
	if rev > h.Revision {
		return nil, &daemon.StateError{Err: daemon.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q has no revision %d; its latest is %d", sessionID, rev, h.Revision)}
	}
	var rec storagev1.RevisionRecord
	found, err := get(t, h, sessionID, revisionKey(sessionID, rev), &rec)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &daemon.StateError{Err: daemon.ErrRevisionNotFound, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
			Msg: fmt.Sprintf("session %q no longer keeps revision %d", sessionID, rev)}
	}
	return &rec, nil
}

func checkpoint(t *tx, sessionID string, h *storagev1.SessionRecord, rev uint64) (daemon.Checkpoint, error) {
	rec, err := revision(t, sessionID, h, rev)
	if err != nil {
		return daemon.Checkpoint{}, err
	}
	cp := daemon.Checkpoint{
		SessionID:    sessionID,
		Revision:     rec.Revision,
		Epoch:        h.Epoch,
		Task:         rec.Task,
		Turn:         rec.Turn,
		TokensUsed:   rec.TokensUsed,
		MessageCount: rec.MessageCount,
		StateJSON:    rec.StateJson,
		Labels:       maps.Clone(rec.Labels),
		SaveTime:     rec.SaveTime.AsTime(),
	}
	for _, t := range rec.PendingToolUses {
		cp.PendingToolUses = append(cp.PendingToolUses, daemon.ToolUseFromProto(t))
	}
	return cp, nil
}

func (s *Store) Messages(ctx context.Context, sessionID string, rev, start uint64, maxBytes, maxCount int) ([]daemon.Message, error) {
	var out []daemon.Message
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		rec, err := revision(t, sessionID, h, rev)
		if err != nil {
			return err
		}
		size := 0
		idx := uint64(0)
		for _, sg := range rec.Segments {
			if start >= idx+sg.Count {
				idx += sg.Count
				continue
			}
			for seq := sg.FirstSeq + (max(start, idx) - idx); seq < sg.FirstSeq+sg.Count; seq++ {
				var m savepointv1.Message
				found, err := get(t, h, sessionID, messageKey(sessionID, seq), &m)
				if err != nil {
					return err
				}
				if !found {
					return corrupt(h, sessionID, fmt.Errorf("message %d of revision %d is missing", seq, rec.Revision))
				}
				dm := daemon.Message{Role: m.Role, ContentJSON: m.ContentJson}
				size += daemon.MessageSize(dm)
				if len(out) > 0 && (size > maxBytes || (maxCount > 0 && len(out) >= maxCount)) {
					return nil
				}
				out = append(out, dm)
			}
			idx += sg.Count
		}
		return nil
	})
	return out, err
}

func (s *Store) PendingCalls(ctx context.Context, sessionID string) (uint64, []daemon.PendingCall, error) {
	var rev uint64
	var calls []daemon.PendingCall
	err := s.view(ctx, func(t *tx) error {
		h, err := mustHead(t, sessionID)
		if err != nil {
			return err
		}
		rec, err := revision(t, sessionID, h, 0)
		if err != nil {
			return err
		}
		rev = rec.Revision
		for _, u := range rec.PendingToolUses {
			var call storagev1.CallRecord
			if _, err := get(t, h, sessionID, callKey(sessionID, u.ToolUseId), &call); err != nil {
				return err
			}
			pc := daemon.PendingCall{ToolUse: daemon.ToolUseFromProto(u), Begun: call.Begun, IdempotencyKey: call.IdempotencyKey}
			if call.Effect != nil {
				e := daemon.EffectFromProto(call.Effect)
				pc.Effect = &e
			}
			calls = append(calls, pc)
		}
		return nil
	})
	return rev, calls, err
}

func (s *Store) ListSessions(ctx context.Context, after string, limit int, labelFilter map[string]string) ([]daemon.SessionSummary, error) {
	var out []daemon.SessionSummary
	err := s.view(ctx, func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		seek := []byte{kindSession}
		if after != "" {
			seek = sessionKey(after)
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			_, sid, _, err := decodeKey(key)
			if err != nil || sid == after {
				continue
			}
			var h storagev1.SessionRecord
			if err := item.Value(func(v []byte) error { return decodeValue(key, v, &h) }); err != nil {
				// A damaged head is listed so an operator can find and delete it.
				out = append(out, daemon.SessionSummary{SessionID: sid})
				continue
			}
			if h.Deleted || !hasLabels(h.Labels, labelFilter) {
				continue
			}
			out = append(out, daemon.SessionSummary{
				SessionID: sid, Revision: h.Revision, Epoch: h.Epoch, Task: h.Task, Turn: h.Turn,
				MessageCount: h.MessageCount, PendingToolUseCount: h.PendingToolUseCount,
				Labels: maps.Clone(h.Labels), UpdateTime: h.UpdateTime.AsTime(),
			})
		}
		return nil
	})
	return out, err
}

func hasLabels(labels, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (s *Store) DeleteSession(ctx context.Context, sessionID string, epoch uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer s.lock(sessionID)()
	var tombEpoch uint64
	err := s.update(func(t *tx) error {
		h, err := mustHead(t, sessionID)
		switch {
		case errors.Is(err, daemon.ErrCorrupt):
			// A session whose head cannot be decoded can still be deleted.
			// Its epoch is unknown: the tombstone takes the highest epoch
			// any readable revision was saved under, or the caller's.
			tombEpoch = max(epoch, savedEpoch(t, sessionID))
		case err != nil:
			return err
		default:
			if err := fence(h, sessionID, epoch); err != nil {
				return err
			}
			tombEpoch = h.Epoch
		}
		return put(t, sessionKey(sessionID), &storagev1.SessionRecord{
			Deleted: true, Purging: true, Epoch: tombEpoch, UpdateTime: timestamppb.New(s.now()),
		})
	})
	if err != nil {
		return 0, err
	}
	return tombEpoch, s.purge(sessionID)
}

// savedEpoch returns the highest epoch among the session's readable
// revisions.
func savedEpoch(t *tx, sessionID string) uint64 {
	var top uint64
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: sessionScope(kindRevision, sessionID)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var rec storagev1.RevisionRecord
		key := it.Item().KeyCopy(nil)
		if v, err := it.Item().ValueCopy(nil); err == nil && decodeValue(key, v, &rec) == nil {
			top = max(top, rec.Epoch)
		}
	}
	return top
}

// purgeBatch bounds the keys deleted per transaction, well under Badger's
// transaction limit.
const purgeBatch = 1000

// purge deletes a tombstoned session's records in batches, then clears the
// tombstone's purging mark. It is restarted at Open if interrupted.
func (s *Store) purge(sessionID string) error {
	for _, kind := range []byte{kindRevision, kindMessage, kindCall, kindRequest} {
		prefix := sessionScope(kind, sessionID)
		for more := true; more; {
			err := s.update(func(t *tx) error {
				it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
				defer it.Close()
				n := 0
				for it.Rewind(); it.Valid() && n < purgeBatch; it.Next() {
					t.delete(it.Item().KeyCopy(nil))
					n++
				}
				more = n > 0
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return s.update(func(t *tx) error {
		var rec storagev1.SessionRecord
		if _, err := get(t, nil, sessionID, sessionKey(sessionID), &rec); err != nil {
			return err
		}
		if !rec.Deleted {
			return nil // re-created meanwhile; nothing to clear
		}
		rec.Purging = false
		return put(t, sessionKey(sessionID), &rec)
	})
}

// sessionsWhere returns the ids of the sessions whose head (or tombstone)
// satisfies pred; a head that does not decode is left for Verify to report.
func (s *Store) sessionsWhere(pred func(*storagev1.SessionRecord) bool) ([]string, error) {
	var sids []string
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			var h storagev1.SessionRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) != nil || !pred(&h) {
				continue
			}
			_, sid, _, _ := decodeKey(key)
			sids = append(sids, sid)
		}
		return nil
	})
	return sids, err
}

// finishPurges completes deletes interrupted by a crash.
func (s *Store) finishPurges() error {
	pending, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool { return h.Purging })
	if err != nil {
		return err
	}
	for _, sid := range pending {
		s.log.Info("finishing an interrupted delete", "session_id", sid)
		if err := s.purge(sid); err != nil {
			return err
		}
	}
	return nil
}

// badgerLogger sends Badger's log lines to slog.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error("badger: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn("badger: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug("badger: " + fmt.Sprintf(f, a...)) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debug("badger: " + fmt.Sprintf(f, a...)) }
