package badgerstore

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Open's part of the write-ahead log (wal.go): the replay into Badger, the
// check that nothing acknowledged is missing, and the mark moved past the
// replayed records.

// replayLog opens the write-ahead log and replays the records after its
// mark into Badger, which a power cut routinely leaves behind the log.
func (s *Store) replayLog(dir string, badgerSeq uint64) (*wal, walOpen, error) {
	w, res, err := openWAL(filepath.Join(dir, WALDir), s.key, badgerSeq, func(lsn uint64, payload []byte) error {
		v, ws, err := decodeCommitPayload(payload)
		if err != nil {
			return fmt.Errorf("%w: write-ahead log record %d: %v", ErrDamaged, lsn, err)
		}
		return applyCommit(s.db, v-1, v, lsn, [][]write{ws})
	})
	if err != nil {
		return nil, res, err
	}
	if res.replayed > 0 || res.cut {
		s.log.Info("replayed the write-ahead log", "from_commit", res.mark.lsn, "records", res.replayed,
			"last_commit", res.end.lsn, "tail_cut", res.cut)
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
func (s *Store) checkBehind(dir string, badgerSeq uint64, res walOpen, acceptLoss bool) (uint64, error) {
	data, err := readSeq(s.db)
	if err != nil && !errors.Is(err, errNoSeq) {
		return 0, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	lostTo := uint64(0) // set when Badger lost commits the replay cannot give back
	if badgerSeq < res.mark.lsn {
		data, lostTo = badgerSeq, res.mark.lsn // the replay added what followed the mark, not what preceded it
	}
	acked, what := res.end.lsn, "was acknowledged or is in the write-ahead log"
	mark, found, err := readHWM(dir)
	if err != nil {
		return 0, err
	}
	if found && mark >= acked {
		acked, what = mark, "was acknowledged"
	}
	if data >= acked {
		if data > res.end.lsn {
			// Badger holds commits the log lost; nothing acknowledged is missing.
			s.log.Warn("the write-ahead log ends before the data", "log_last_commit", res.end.lsn, "data_last_commit", data)
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
	last := max(data, res.end.lsn)
	if err := writeHWM(dir, last); err != nil {
		return 0, err
	}
	return last, nil
}

// markLog makes Badger durable after the replay and moves the mark to the
// log's end, with seq as its LSN: the writer goes on with seq+1. The mark
// also makes this Open's epoch durable before any record is written.
func (s *Store) markLog(w *wal, end walPos, seq uint64) error {
	files := &dataFiles{dir: s.dir}
	defer files.close()
	err := files.beforeSync(s.now(), true)
	if err == nil {
		err = files.syncMemtables()
	}
	if err == nil && !skipSync {
		err = s.db.Sync()
	}
	if err == nil {
		err = files.afterSync()
	}
	if err == nil {
		end.lsn = seq
		w.next, w.applied = seq+1, end
		err = w.writeMark(end)
	}
	if err != nil {
		return fmt.Errorf("making the replayed write-ahead log durable: %w", err)
	}
	return nil
}
