package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/sysfile"
	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
)

// Three gaps in Badger's durability with SyncWrites off, each found by the
// power-cut harness (tests/crashtest TestPowerCut), which db.Sync alone
// leaves open and the engine closes around it:
//
//   - Badger creates files (a value-log file, a memtable's log) without
//     syncing the directory that names them: ristretto's z.OpenMmapFile
//     means to, but tests the size after extending the new file. A power
//     cut then loses the file, and every acknowledged commit in it.
//   - db.Sync syncs the memtable's log before the value log, so a power cut
//     between the two leaves a durable key whose value is not: the commit
//     was never acknowledged, but its session reads as damaged.
//   - At a value-log rotation Badger never syncs the old file again, so the
//     values of the commit that filled it are not durable.
//
// So, around each commit's db.Sync, the engine syncs the current value-log
// file first when the commit wrote a value to it (and the previous file
// after a rotation), and the data directory after, when its entries may
// have changed since its last sync: one fstat per commit, and a readdir
// and directory sync only after a file was created, renamed or removed
// (Badger's, or the high-water mark's each second), repeated while the
// directory's coarse mtime cannot yet tell a later change.

// dirChangeWindow bounds the granularity of a directory's mtime: the
// kernel stamps it from a coarse clock that lags the real one by at most a
// tick (10 ms at HZ=100). Once a directory sync has begun this long after
// the mtime it saw, any later change stamps a different mtime; before that,
// a change within the same tick may leave the mtime as it was.
const dirChangeWindow = 20 * time.Millisecond

// dataFiles syncs the files of one data directory that db.Sync leaves out.
type dataFiles struct {
	dir      string
	d        *os.File
	mtime    unix.Timespec // the directory's mtime seen just before its last sync
	syncedAt time.Time     // when the commit of the last directory sync began
	vlog     *os.File      // the newest value-log file
	vlogFid  int
	dirSyncs uint64 // directory syncs made, for tests
	changed  bool   // set by beforeSync: sync the directory after db.Sync
	// datasync syncs a file's data; nil is fdatasync (replaced in tests).
	datasync func(*os.File) error
}

// beforeSync runs after a commit is written and before db.Sync: it notes
// whether the directory may have changed, follows a value-log rotation
// (syncing the file it left), and syncs the newest value-log file when
// wroteValues says the commit put a value in it.
func (f *dataFiles) beforeSync(now time.Time, wroteValues bool) error {
	if f.d == nil {
		d, err := os.Open(f.dir)
		if err != nil {
			return fmt.Errorf("opening the data directory to sync it: %w", err)
		}
		f.d, f.mtime = d, unix.Timespec{Sec: -1} // never synced
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.d.Fd()), &st); err != nil {
		return fmt.Errorf("stat of the data directory: %w", err)
	}
	f.changed = st.Mtim != f.mtime || f.syncedAt.Sub(time.Unix(st.Mtim.Unix())) <= dirChangeWindow
	if f.changed {
		f.mtime, f.syncedAt = st.Mtim, now
		if err := f.followVlog(); err != nil {
			return err
		}
	}
	if wroteValues && f.vlog != nil {
		return f.syncVlog()
	}
	return nil
}

// afterSync syncs the directory when beforeSync saw that it may have changed.
func (f *dataFiles) afterSync() error {
	if !f.changed || faults.SkipDirSync {
		return nil
	}
	if err := f.d.Sync(); err != nil {
		return fmt.Errorf("sync of the data directory: %w", err)
	}
	f.dirSyncs++
	return nil
}

// followVlog opens the newest value-log file when it is not the one held,
// syncing the one held first: Badger filled and truncated it.
func (f *dataFiles) followVlog() error {
	names, err := f.d.Readdirnames(-1)
	if _, serr := f.d.Seek(0, 0); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("listing the data directory: %w", err)
	}
	newest := -1
	for _, n := range names {
		if fid, ok := strings.CutSuffix(n, ".vlog"); ok {
			if id, err := strconv.Atoi(fid); err == nil && id > newest {
				newest = id
			}
		}
	}
	if newest <= f.vlogFid && f.vlog != nil {
		return nil
	}
	if f.vlog != nil {
		if err := f.syncVlog(); err != nil {
			return err
		}
		f.vlog.Close()
		f.vlog = nil
	}
	if newest < 0 {
		return nil
	}
	v, err := os.Open(filepath.Join(f.dir, fmt.Sprintf("%06d.vlog", newest)))
	if err != nil {
		return fmt.Errorf("opening the value log to sync it: %w", err)
	}
	f.vlog, f.vlogFid = v, newest
	return nil
}

// syncVlog makes the value-log file held durable with fdatasync, as
// Badger's msync (MS_SYNC is a datasync) would: the file's size and blocks
// are covered, its times are not, which spares a journal commit.
func (f *dataFiles) syncVlog() error {
	datasync := f.datasync
	if datasync == nil {
		datasync = sysfile.Fdatasync
	}
	if err := datasync(f.vlog); err != nil {
		return fmt.Errorf("sync of value log %s: %w", f.vlog.Name(), err)
	}
	return nil
}

func (f *dataFiles) close() {
	for _, c := range []*os.File{f.d, f.vlog} {
		if c != nil {
			c.Close()
		}
	}
	f.d, f.vlog = nil, nil
}

// syncMemtables fdatasyncs every memtable's log in the directory. db.Sync
// syncs only the active one's, and a memtable Badger rotated away is
// synced again only by its flush to a table, which may not have run by the
// time a checkpoint's mark claims its commits. The build with the nosync fault (faults.SkipSync)
// skips it.
func (f *dataFiles) syncMemtables() error {
	if faults.SkipSync {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(f.dir, "*.mem"))
	if err != nil {
		return err
	}
	for _, name := range names {
		m, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // flushed and removed meanwhile: its table is synced
		}
		if err != nil {
			return err
		}
		if f.datasync != nil {
			err = f.datasync(m)
		} else {
			err = sysfile.Fdatasync(m)
		}
		m.Close()
		if err != nil {
			return fmt.Errorf("sync of memtable log %s: %w", name, err)
		}
	}
	return nil
}
