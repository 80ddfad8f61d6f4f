package badgerstore

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// A checkpoint makes Badger durable up to the last commit applied to it and
// then records that commit's LSN in the log's mark, so that Open replays
// only the records after it and the segments wholly before it can be
// recycled. It runs in the background every checkpointInterval when
// anything was committed, sooner once checkpointBytes of log were written
// since the mark, after an exclusive operation (which changes Badger
// outside the log), after the value-log GC, and at Close. Replay at Open
// is thus bounded by about one interval's commits or checkpointBytes of
// log, whichever comes first (docs/reliability.md).

// checkpointInterval is how often at most the background checkpoint runs.
// A variable for tests.
var checkpointInterval = time.Second

// checkpointBytes is the log written since the mark that starts a
// checkpoint before the interval is up.
const checkpointBytes = 8 << 20

// checkpointLoop checkpoints in the background until the engine stops or
// fails; a failed checkpoint fails the engine.
func (e *engine) checkpointLoop() {
	defer e.wg.Done()
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
		}
		if e.err() != nil {
			return
		}
		if err := e.checkpoint(false); err != nil {
			e.fail(fmt.Errorf("checkpoint: %w", err))
			return
		}
		// A spare ready for the next segment keeps its zero-filling off the
		// commit path; failing here (a full disk) is not fatal, the commit
		// that needs it tries again and answers a full disk itself.
		_ = e.wal.PrepareSpare()
	}
}

// checkpoint syncs Badger and moves the mark to the last commit applied,
// then recycles the segments wholly before it. Without force it does
// nothing when no commit was applied since the mark; with force it syncs
// Badger all the same (an exclusive operation or the value-log GC changed
// it). In memory it only syncs Badger, which is a no-op.
func (e *engine) checkpoint(force bool) error {
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	if e.wal == nil {
		return e.syncBadger()
	}
	mark, applied := e.wal.Positions()
	if applied == mark && !force {
		return nil
	}
	e.wal.ResetSinceMark()
	tables := tableIDs(e.db) // before the directory sync that makes their entries durable
	if err := e.syncBadger(); err != nil {
		return err
	}
	if err := e.recordTables(tables); err != nil {
		return err
	}
	if applied != mark {
		if err := e.wal.WriteMark(applied); err != nil {
			return err
		}
	}
	return e.wal.Recycle(applied.Segment())
}

// syncBadger makes durable everything applied to Badger so far: the value
// log (the file Badger left at a rotation too), every memtable's log, then
// db.Sync, then the data directory when Badger created or removed a file
// since its last sync (engine_files.go).
func (e *engine) syncBadger() error {
	if e.files != nil {
		if err := e.files.beforeSync(time.Now(), true); err != nil {
			return err
		}
		if err := e.files.syncMemtables(); err != nil {
			return err
		}
	}
	if err := e.badgerSync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if e.files != nil {
		return e.files.afterSync()
	}
	return nil
}

// recordTables writes TablesFile when the tables differ from those it
// holds: the tables in Badger's levels before the checkpoint's directory
// sync, whose entries that sync made durable (manifest_heal.go).
func (e *engine) recordTables(ids []uint64) error {
	if e.files == nil || e.tablesWritten && slices.Equal(ids, e.tables) {
		return nil
	}
	if err := writeTables(e.files.dir, ids); errors.Is(err, syscall.ENOSPC) {
		return nil // a full disk: the file as it was still lists only durable tables; the next checkpoint tries again
	} else if err != nil {
		return fmt.Errorf("write %s: %w", TablesFile, err)
	}
	e.tables, e.tablesWritten = ids, true
	return nil
}
