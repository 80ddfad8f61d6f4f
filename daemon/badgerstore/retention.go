package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/sysfile"
)

// Retention says what the store removes by itself, and how often it looks.
// The zero value removes nothing.
type Retention struct {
	// Completed deletes a completed or failed session this long after its
	// completion; zero keeps it.
	Completed time.Duration
	// Idle deletes a session, whatever its status, not updated (saved or
	// completed) for this long; zero keeps it.
	Idle time.Duration
	// Revisions keeps only each session's last Revisions revisions and the
	// messages they reach; the ledger is kept whole. Zero keeps them all.
	Revisions int
	// Interval is the time between passes of retention and value-log GC;
	// zero means DefaultMaintenanceInterval.
	Interval time.Duration
}

// DefaultMaintenanceInterval is how often retention and value-log GC run
// unless Retention.Interval says otherwise.
const DefaultMaintenanceInterval = 10 * time.Minute

// valueLogFileSize is ValueLogFileSize, smaller in tests so that value-log
// GC has files to collect without writing 64 MiB: set by unit tests, and 1
// MiB in a build with the smallvlog fault (faults.SmallValueLog).
var valueLogFileSize = builtValueLogFileSize()

// builtValueLogFileSize is ValueLogFileSize, or 1 MiB (Badger's smallest) in
// a build with the smallvlog fault, whose value-log GC then finds files to
// collect within seconds of load.
func builtValueLogFileSize() int64 {
	if faults.SmallValueLog {
		return 1 << 20
	}
	return ValueLogFileSize
}

// gcDiscardRatio is the share of a value-log file that must be garbage for
// GC to rewrite it (Badger's recommendation).
const gcDiscardRatio = 0.5

// MaintenanceReport is what one pass removed.
type MaintenanceReport struct {
	ExpiredTombstones int // removed a tombstone retention after their purge
	DeletedSessions   int // by Retention.Completed or Retention.Idle
	PrunedRevisions   int // by Retention.Revisions
	PrunedMessages    int // reached only by pruned revisions
	RewrittenLogs     int // value-log files rewritten by GC
	Compacted         bool
}

func (s *Store) maintainEvery(r Retention) {
	every := r.Interval
	if every <= 0 {
		every = DefaultMaintenanceInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		rep, err := s.Maintain(context.Background(), r)
		if err != nil {
			s.log.Error("retention and value-log GC", "err", err)
			continue
		}
		if rep != (MaintenanceReport{}) {
			s.log.Info("retention and value-log GC", "expired_tombstones", rep.ExpiredTombstones, "deleted_sessions", rep.DeletedSessions,
				"pruned_revisions", rep.PrunedRevisions, "pruned_messages", rep.PrunedMessages,
				"rewritten_value_logs", rep.RewrittenLogs, "compacted", rep.Compacted)
		}
	}
}

// Maintain runs one pass: it removes the tombstones whose retention has
// passed (raising the epoch floor), deletes the sessions r expires (behind
// tombstones, as DeleteSession does), prunes old revisions, and then, when
// it removed anything, compacts the LSM tree so the removed records leave
// the tables, and runs value-log GC until no file is rewritten.
func (s *Store) Maintain(ctx context.Context, r Retention) (MaintenanceReport, error) {
	var rep MaintenanceReport
	var err error
	if rep.ExpiredTombstones, err = s.expireTombstones(); err != nil {
		return rep, err
	}
	now := s.now()
	expired := func(h *storagev1.SessionRecord) bool {
		if h.Deleted {
			return false
		}
		if r.Idle > 0 && h.GetUpdateTime().AsTime().Before(now.Add(-r.Idle)) {
			return true
		}
		return r.Completed > 0 && statusFromRecord(h) != core.StatusActive && h.GetCompleteTime().AsTime().Before(now.Add(-r.Completed))
	}
	if r.Idle > 0 || r.Completed > 0 {
		sids, err := s.sessionsWhere(expired)
		if err != nil {
			return rep, err
		}
		if rep.DeletedSessions, err = s.expire(ctx, sids, expired); err != nil {
			return rep, err
		}
	}
	if r.Revisions > 0 {
		sids, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool {
			return !h.Deleted && h.Revision > uint64(r.Revisions)
		})
		if err != nil {
			return rep, err
		}
		for _, sid := range sids {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			revs, msgs, err := s.pruneRevisions(sid, uint64(r.Revisions))
			if err != nil {
				return rep, err
			}
			rep.PrunedRevisions += revs
			rep.PrunedMessages += msgs
		}
	}
	if s.inMem {
		return rep, nil
	}
	rep.Compacted = rep.DeletedSessions > 0
	if rep.PrunedRevisions > 0 {
		// Pruned records leave the tables when a compaction meets their
		// deletes, once the memtable holding them is flushed (at the latest
		// by the next pass's Flatten under a steady write load).
		if err := s.db.Flatten(1); err != nil {
			return rep, err
		}
		rep.Compacted = true
	}
	return rep, s.collectValueLog(&rep)
}

// collectValueLog runs Badger's value-log GC until it rewrites nothing.
// Badger deletes a log file right after moving its live values to the head
// of the log, before they are synced (the store runs it without
// SyncWrites): a power loss then could lose acknowledged values. An open
// iterator defers those deletions, so one is held until a checkpoint
// (checkpoint.go) has made the moved values, and Badger, durable; a failed sync keeps the old files
// until the process exits, and fails the engine as a failed commit does.
//
// No checkpoint runs while the GC rewrites: a checkpoint syncs the value
// log before the memtable logs, so a move written between the two would
// have its key durable and its value not, and a move, unlike a commit, is
// not in savepointd's log to be replayed. Badger's own memtable flushes
// and compactions cannot be kept out, so GCFile marks the GC in progress
// for Open to recover moves a power cut lost (gc_recover.go).
func (s *Store) collectValueLog(rep *MaintenanceReport) error {
	if err := beginGC(s.dir); err != nil {
		return fmt.Errorf("value-log GC: %w", err)
	}
	hold := s.readTxn()
	it := hold.NewIterator(badger.IteratorOptions{})
	s.eng.ckptMu.Lock()
	for {
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			break
		}
		if err != nil {
			s.eng.ckptMu.Unlock()
			it.Close()
			s.discardReadTxn(hold)
			return err
		}
		rep.RewrittenLogs++
	}
	s.eng.ckptMu.Unlock()
	if rep.RewrittenLogs > 0 {
		if err := s.syncValueLogs(); err != nil {
			err = fmt.Errorf("value-log GC: syncing the moved values: %w", err)
			s.eng.fail(err)
			return err
		}
		if err := s.eng.checkpoint(true); err != nil {
			err = fmt.Errorf("value-log GC: syncing the moved values: %w", err)
			s.eng.fail(err)
			return err
		}
	}
	if err := endGC(s.dir); err != nil {
		// The moves are durable: the next Open only reads every value
		// again, and finds nothing to recover.
		s.log.Warn("value-log GC: removing its marker", "file", GCFile, "err", err)
	}
	it.Close() // the rewritten files go now
	s.discardReadTxn(hold)
	return nil
}

// expire deletes those of sids still expired once locked, behind
// tombstones, and returns how many. The records go by one DropPrefix, which
// removes them from the memtables and every table at once, so their space
// returns at the value-log GC that follows; a purge's deletes would stay in
// the memtable, out of every compaction's reach, until it fills. Badger
// refuses writes during DropPrefix, so it runs alone in the commit queue,
// between two commits. The sessions stay locked throughout, so none is re-created
// before its old records are gone; a crash leaves purge records, which the
// next Open finishes.
func (s *Store) expire(ctx context.Context, sids []string, expired func(*storagev1.SessionRecord) bool) (int, error) {
	defer s.lockAll(sids)()
	var deleted []string
	var prefixes [][]byte
	for _, sid := range sids {
		if err := ctx.Err(); err != nil {
			break
		}
		err := s.update(func(t *tx) error {
			h, _, err := head(t, sid)
			if err != nil || h == nil || !expired(h) {
				return err // saved, completed or deleted meanwhile
			}
			deleted = append(deleted, sid)
			for _, kind := range []byte{kindRevision, kindMessage, kindLedgerEntry, kindRequest} {
				prefixes = append(prefixes, sessionScope(kind, sid))
			}
			if err := put(t, purgeKey(sid), &storagev1.PurgeRecord{Epoch: h.Epoch}); err != nil {
				return err
			}
			return put(t, sessionKey(sid), &storagev1.SessionRecord{Deleted: true, Epoch: h.Epoch, UpdateTime: timestamppb.New(s.now())})
		})
		if err != nil {
			return 0, err
		}
	}
	if len(deleted) == 0 {
		return 0, nil
	}
	if err := s.eng.runExclusive(context.Background(), func() error { return s.db.DropPrefix(prefixes...) }); err != nil {
		return 0, err
	}
	for _, sid := range deleted {
		if err := s.purge(sid); err != nil { // what DropPrefix left: the purge record; the tombstone's expiry
			return 0, err
		}
	}
	return len(deleted), nil
}

// lockAll takes the session locks of sids, each stripe once, in order.
func (s *Store) lockAll(sids []string) func() {
	var taken [len(Store{}.locks)]bool
	for _, sid := range sids {
		h := fnv.New32a()
		h.Write([]byte(sid))
		taken[h.Sum32()%uint32(len(s.locks))] = true
	}
	for i, t := range taken {
		if t {
			s.locks[i].Lock()
		}
	}
	return func() {
		for i, t := range taken {
			if t {
				s.locks[i].Unlock()
			}
		}
	}
}

// pruneRevisions deletes the revisions of sid older than its last keep and
// the messages no kept revision reaches. Call records stay: a kept
// revision's calls, and every recorded effect, keep their ledger entries.
func (s *Store) pruneRevisions(sid string, keep uint64) (revs, msgs int, err error) {
	defer s.lock(sid)()
	var first uint64 // the oldest kept revision
	var live []*storagev1.Segment
	err = s.view(context.Background(), func(t *tx) error {
		h, err := mustHead(t, sid)
		if err != nil || h.Revision <= keep {
			return err
		}
		first = h.Revision - keep + 1
		for r := first; r <= h.Revision; r++ {
			var rec storagev1.RevisionRecord
			found, err := get(t, h, sid, revisionKey(sid, r), &rec)
			if err != nil {
				return err
			}
			if !found {
				return corrupt(h, sid, errors.New("a kept revision is missing"))
			}
			live = append(live, rec.Segments...)
		}
		return nil
	})
	if err != nil || first == 0 {
		return 0, 0, err
	}
	reached := func(seq uint64) bool {
		for _, sg := range live {
			if seq >= sg.FirstSeq && seq < sg.FirstSeq+sg.Count {
				return true
			}
		}
		return false
	}
	drop := func(kind byte, gone func(n uint64) bool) (int, error) {
		prefix := sessionScope(kind, sid)
		total := 0
		for more := true; more; {
			err := s.update(func(t *tx) error {
				it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
				defer it.Close()
				n := 0
				more = false
				for it.Rewind(); it.Valid(); it.Next() {
					key := it.Item().Key()
					if len(key) != len(prefix)+8 || !gone(binary.BigEndian.Uint64(key[len(prefix):])) {
						continue
					}
					if n == purgeBatch {
						more = true
						break
					}
					t.delete(it.Item().KeyCopy(nil))
					n++
				}
				total += n
				return nil
			})
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	if revs, err = drop(kindRevision, func(r uint64) bool { return r < first }); err != nil {
		return revs, 0, err
	}
	msgs, err = drop(kindMessage, func(seq uint64) bool { return !reached(seq) })
	return revs, msgs, err
}

// syncValueLogs makes every value-log file of the store durable, and the
// directory naming them, before the engine's sync makes durable the keys
// pointing into them: db.Sync alone syncs the memtable's log first, and
// the value-log GC's moved values can be in any file it wrote. An in-memory
// store has none.
func (s *Store) syncValueLogs() error {
	if s.syncVlogs != nil {
		return s.syncVlogs()
	}
	return syncVlogFiles(s.dir)
}

// syncVlogFiles fdatasyncs every value-log file in dir, then dir; an empty
// dir (an in-memory store) has none.
func syncVlogFiles(dir string) error {
	if dir == "" {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return err
	}
	for _, name := range names {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted meanwhile: nothing of it is read any more
		}
		if err != nil {
			return err
		}
		err = sysfile.Fdatasync(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("sync of value log %s: %w", name, err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
