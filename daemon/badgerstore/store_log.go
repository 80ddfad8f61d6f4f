package badgerstore

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/wal"
	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
)

// WALDir is the write-ahead log's directory inside the data directory.
const WALDir = wal.Dir

// Open's part of the write-ahead log (internal/wal): the replay into Badger, the
// check that nothing acknowledged is missing, and the mark moved past the
// replayed records.

// replayLog opens the write-ahead log and replays the records after its
// mark into Badger, which a power cut routinely leaves behind the log.
func (s *Store) replayLog(dir string, badgerSeq uint64) (*wal.Log, wal.Opened, error) {
	w, res, err := wal.Open(filepath.Join(dir, WALDir), s.key, badgerSeq, func(lsn uint64, payload []byte) error {
		v, ws, err := decodeCommitPayload(payload)
		if err != nil {
			return fmt.Errorf("%w: write-ahead log record %d: %v", ErrDamaged, lsn, err)
		}
		return applyCommit(s.db, v-1, v, lsn, [][]write{ws})
	})
	if errors.Is(err, wal.ErrDamaged) {
		return nil, res, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	if err != nil {
		return nil, res, err
	}
	if res.Replayed > 0 || res.Cut {
		s.log.Info("replayed the write-ahead log", "from_commit", res.Mark.LSN(), "records", res.Replayed,
			"last_commit", res.End.LSN(), "tail_cut", res.Cut)
	}
	return w, res, nil
}

// checkBehind returns the sequence number the store goes on from, once
// the replay is done. Badger must then hold every commit of the log: before
// the replay, every commit up to the mark (a checkpoint synced them; the
// replay rewrites the commit number, so a Badger rolled back behind its
// mark is told by badgerSeq, its number before the replay), and after it,
// every commit up to the log's last LSN and every commit the high-water
// mark recorded. This is how a log or a Badger rolled back is told apart
// from a power cut, which leaves Badger behind the log but not its mark. A
// store behind is refused with ErrBehind, or served with acceptLoss, the
// loss logged.
func (s *Store) checkBehind(dir string, badgerSeq uint64, res wal.Opened, acceptLoss bool) (uint64, error) {
	data, err := readSeq(s.db)
	if err != nil && !errors.Is(err, errNoSeq) {
		return 0, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	lostTo := uint64(0) // set when Badger lost commits the replay cannot give back
	if badgerSeq < res.Mark.LSN() {
		data, lostTo = badgerSeq, res.Mark.LSN() // the replay added what followed the mark, not what preceded it
	}
	acked, what := res.End.LSN(), "was acknowledged or is in the write-ahead log"
	mark, found, err := readHWM(dir)
	if err != nil {
		return 0, err
	}
	if found && mark >= acked {
		acked, what = mark, "was acknowledged"
	}
	if data >= acked {
		if data > res.End.LSN() {
			// Badger holds commits the log lost; nothing acknowledged is missing.
			s.log.Warn("the write-ahead log ends before the data", "log_last_commit", res.End.LSN(), "data_last_commit", data)
		}
		return data, nil
	}
	if lostTo == 0 {
		lostTo = acked
	}
	if !acceptLoss {
		return 0, fmt.Errorf("%w: the data in %s ends at commit %d but commit %d %s; "+
			"commits %d to %d are lost. Restore a backup, or start with --accept-data-loss to serve what is left",
			ErrBehind, dir, data, acked, what, data+1, lostTo)
	}
	s.log.Error("serving a store behind its high-water mark: acknowledged commits are lost",
		"data_dir", dir, "last_commit", data, "high_water_mark", acked, "lost_commits", lostTo-data)
	// The log goes on after its own last LSN; the lost numbers stay unused.
	last := max(data, res.End.LSN())
	if err := writeHWM(dir, last); err != nil {
		return 0, err
	}
	return last, nil
}

// markLog makes Badger durable after the replay and moves the mark to the
// log's end, with seq as its LSN: the writer goes on with seq+1. The mark
// also makes this Open's epoch durable before any record is written.
func (s *Store) markLog(w *wal.Log, end wal.Pos, seq uint64) error {
	files := &dataFiles{dir: s.dir}
	defer files.close()
	err := files.beforeSync(s.now(), true)
	if err == nil {
		err = files.syncMemtables()
	}
	if err == nil && !faults.SkipSync {
		err = s.db.Sync()
	}
	if err == nil {
		err = files.afterSync()
	}
	if err == nil {
		err = w.MarkAt(end, seq)
	}
	if err != nil {
		return fmt.Errorf("making the replayed write-ahead log durable: %w", err)
	}
	return nil
}

// verifyLog checks the part of the write-ahead log still kept (see
// wal.Log.Verify), each record's payload a well-formed commit, reporting
// each problem through note; it holds checkpoints (so recycling) off
// meanwhile.
func (e *engine) verifyLog(note func(problem string)) {
	if e.wal == nil {
		return
	}
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	e.wal.Verify(func(payload []byte) error {
		_, _, err := decodeCommitPayload(payload)
		return err
	}, note)
}
