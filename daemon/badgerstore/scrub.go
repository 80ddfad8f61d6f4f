package badgerstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Tables are verified against their checksums once, not at every Open:
// VerifiedFile lists the tables already verified (by id, size and
// modification time), and Open checks only the others, so that it costs
// what the last run wrote, not the whole store. A scrub in the background
// verifies new tables every scrubNewEvery and re-reads every table every
// scrubAllEvery, pausing between tables. Damage the scrub finds is logged
// and counted (Stats.DamagedTables); the keys in the damaged table's range
// then answer core.ErrCheckpointCorrupt (DATA_LOSS, CHECKPOINT_CORRUPT) while the
// rest keep serving, and the table leaves the list, so the next Open checks
// it again and refuses the directory, as it refuses any damaged table.

// VerifiedFile is the file in the data directory that lists the tables
// verified so far; deleting it makes the next Open verify every table.
const VerifiedFile = "savepoint.verified"

const (
	scrubNewEvery = time.Minute
	scrubAllEvery = 24 * time.Hour
	scrubPause    = 50 * time.Millisecond // between two tables
)

// tableStamp identifies one table file's content as far as a stat can.
type tableStamp struct {
	id    uint64
	size  int64
	mtime int64 // Unix nanoseconds
}

func stampOf(dir string, id uint64) (tableStamp, error) {
	fi, err := os.Stat(filepath.Join(dir, table.IDToFilename(id)))
	if err != nil {
		return tableStamp{}, err
	}
	return tableStamp{id: id, size: fi.Size(), mtime: fi.ModTime().UnixNano()}, nil
}

func readVerified(dir string) map[tableStamp]bool {
	out := map[tableStamp]bool{}
	f, err := os.Open(filepath.Join(dir, VerifiedFile))
	if err != nil {
		return out // none yet, or unreadable: everything is verified again
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var st tableStamp
		if _, err := fmt.Sscan(sc.Text(), &st.id, &st.size, &st.mtime); err == nil {
			out[st] = true
		}
	}
	return out
}

// writeVerified replaces the list atomically. It need not be synced: a
// list lost in a crash only makes the next Open verify more.
func writeVerified(dir string, set map[tableStamp]bool) error {
	var b strings.Builder
	for st := range set {
		fmt.Fprintf(&b, "%d %d %d\n", st.id, st.size, st.mtime)
	}
	tmp := filepath.Join(dir, VerifiedFile+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, VerifiedFile))
}

// verifyTable checks every block of one table file against its checksum,
// reading the file through its own read-only mapping. Badger's check
// dereferences a nil block on some damage (table.go:711 in v4.9.6); that
// panic is reported as an error.
func verifyTable(dir string, id uint64, bopts badger.Options) error {
	path := filepath.Join(dir, table.IDToFilename(id))
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return err
	}
	defer mf.Close(-1)
	return faultsAsErrors(func() error {
		t, err := table.OpenTable(mf, table.Options{
			ReadOnly:           true,
			ChkMode:            options.NoVerification,
			BlockSize:          bopts.BlockSize,
			BloomFalsePositive: bopts.BloomFalsePositive,
			Compression:        bopts.Compression,
		})
		if err != nil {
			return err
		}
		return t.VerifyChecksum()
	})
}

// faultsAsErrors runs fn, which reads a memory-mapped file, and returns a
// panic of fn's, or a fault reading a page the file no longer has (Badger
// truncates a table it deletes after a compaction, which can happen while
// the file is mapped here), as an error instead of the crash a SIGBUS is.
func faultsAsErrors(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Badger's checksum verification failed with %v", p)
		}
	}()
	return fn()
}

// verifyAtOpen verifies the tables the list does not name, or all of them
// when the tables are encrypted (a table's key is Badger's to hold), and
// rewrites the list. It returns the first damaged table's error.
func verifyAtOpen(db *badger.DB, dir string) error {
	if dir == "" || len(db.Opts().EncryptionKey) > 0 {
		return verifyTables(db)
	}
	return verifyListed(dir, db.Tables, func() func() { return pinTables(db) }, db.Opts())
}

// pinTables keeps the files of the tables in db's levels until the
// returned release is called: Badger truncates and removes a compacted
// table's file only once no iterator holds the table, and an iterator
// holds every table in the levels when it is made. So a table listed
// before pinTables and still listed after it is read whole, never through
// a mapping its deletion shrinks (a SIGBUS, which Go cannot always turn
// into an error: not within the assembly of a decompressor).
func pinTables(db *badger.DB) (release func()) {
	txn := db.NewTransactionAt(math.MaxUint64, false)
	it := txn.NewIterator(badger.IteratorOptions{})
	return func() {
		it.Close()
		txn.Discard()
	}
}

// verifyTablePinned verifies the table ti of dir, listed by tables before
// the call with its file stamped st, with its file pinned (pin, as
// pinTables). It returns errCompacted when the table is no longer a table:
// no longer listed once pinned, or failing with its file changed or gone
// or no longer listed.
func verifyTablePinned(dir string, ti badger.TableInfo, st tableStamp, tables func() []badger.TableInfo, pin func() func(), opts badger.Options) error {
	defer pin()()
	if !stillListed(tables, ti.ID) {
		return errCompacted
	}
	err := verifyTable(dir, ti.ID, opts)
	if err != nil {
		if now, serr := stampOf(dir, ti.ID); serr != nil || now != st || !stillListed(tables, ti.ID) {
			return errCompacted
		}
	}
	return err
}

var errCompacted = errors.New("compacted away")

// verifyListed is verifyAtOpen over the tables tables lists, each verified
// with its file pinned by pin (as pinTables). Badger's compactions run
// from Open on, so a listed table can be deleted before its file is
// pinned: one gone and no longer listed was compacted away and is skipped
// (Badger opened every table its MANIFEST names, so a missing file still
// listed is damage).
func verifyListed(dir string, tables func() []badger.TableInfo, pin func() func(), opts badger.Options) error {
	known := readVerified(dir)
	verified := map[tableStamp]bool{}
	for _, ti := range tables() {
		st, err := stampOf(dir, ti.ID)
		if errors.Is(err, fs.ErrNotExist) && !stillListed(tables, ti.ID) {
			continue // compacted away since it was listed
		}
		if err != nil {
			return err
		}
		if !known[st] {
			if err := verifyTablePinned(dir, ti, st, tables, pin, opts); errors.Is(err, errCompacted) {
				continue // no longer a table
			} else if err != nil {
				return fmt.Errorf("table %s is damaged: %v", table.IDToFilename(ti.ID), err)
			}
		}
		verified[st] = true
	}
	return writeVerified(dir, verified)
}

// stillListed reports whether tables still lists the table id. Badger
// takes a compacted table off its levels before it truncates and removes
// the file, so a table whose file is gone, empty or changed and that is no
// longer listed was compacted away, not damaged.
func stillListed(tables func() []badger.TableInfo, id uint64) bool {
	return slices.ContainsFunc(tables(), func(t badger.TableInfo) bool { return t.ID == id })
}

// keyRange is a damaged table's span of user keys.
type keyRange struct{ first, last []byte }

// scrubFindings is what the scrub found; the zero value is none.
type scrubFindings struct {
	ranges atomic.Pointer[[]keyRange]
	tables atomic.Uint64
}

// check returns core.ErrCheckpointCorrupt's cause when key is in a damaged table.
func (d *scrubFindings) check(key []byte) error {
	rs := d.ranges.Load()
	if rs == nil {
		return nil
	}
	for _, r := range *rs {
		if bytes.Compare(key, r.first) >= 0 && bytes.Compare(key, r.last) <= 0 {
			return errDamagedTable
		}
	}
	return nil
}

func (d *scrubFindings) add(r keyRange) {
	for {
		old := d.ranges.Load()
		var rs []keyRange
		if old != nil {
			rs = append(rs, *old...)
		}
		rs = append(rs, r)
		if d.ranges.CompareAndSwap(old, &rs) {
			d.tables.Add(1)
			return
		}
	}
}

var errDamagedTable = errors.New("the table holding this record failed its checksum in the background scrub")

// scrub verifies the tables not yet verified (all of them when all is
// true), pausing between tables, and records what it finds. It returns the
// number of damaged tables it found.
func (s *Store) scrub(all bool) (int, error) {
	known := readVerified(s.dir)
	verified := map[tableStamp]bool{}
	found := 0
	for _, ti := range s.db.Tables() {
		select {
		case <-s.stop:
			return found, nil
		default:
		}
		st, err := stampOf(s.dir, ti.ID)
		if errors.Is(err, os.ErrNotExist) {
			continue // compacted away meanwhile
		}
		if err != nil {
			return found, err
		}
		if known[st] && !all {
			verified[st] = true
			continue
		}
		if s.damagedIDs[ti.ID] {
			continue // already reported
		}
		if err := verifyTablePinned(s.dir, ti, st, s.db.Tables, func() func() { return pinTables(s.db) }, s.db.Opts()); errors.Is(err, errCompacted) {
			continue // no longer a table
		} else if err != nil {
			found++
			s.damagedIDs[ti.ID] = true
			s.damage.add(keyRange{first: y.ParseKey(ti.Left), last: y.ParseKey(ti.Right)})
			s.log.Error("the background scrub found a damaged table: the sessions it holds answer CHECKPOINT_CORRUPT; restore the data directory from a backup",
				"table", table.IDToFilename(ti.ID), "level", ti.Level, "first_key", fmt.Sprintf("%q", y.ParseKey(ti.Left)),
				"last_key", fmt.Sprintf("%q", y.ParseKey(ti.Right)), "err", err)
			continue
		}
		verified[st] = true
		time.Sleep(scrubPause)
	}
	return found, writeVerified(s.dir, verified)
}

// scrubLoop runs the scrub until Close: the new tables every scrubNewEvery,
// every table every scrubAllEvery.
func (s *Store) scrubLoop() {
	t := time.NewTimer(scrubNewEvery)
	defer t.Stop()
	lastAll := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		all := time.Since(lastAll) >= scrubAllEvery
		if all {
			lastAll = time.Now()
		}
		if _, err := s.scrub(all); err != nil {
			s.log.Error("background scrub", "err", err)
		}
		t.Reset(scrubNewEvery)
	}
}
