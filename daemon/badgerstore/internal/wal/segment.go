package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/sysfile"
	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
)

// Segments are the log's files, wal/NNNNNNNNNNNNNNNN.seg (the segment's
// number, hexadecimal), each allocated and zero-filled in full once, when
// it is created, so that the fdatasync of a commit rewrites blocks that
// are already allocated and written, and commits no journal. Segments wholly
// before the mark are recycled, as PostgreSQL recycles WAL segments:
// renamed to spare-N and, when the writer needs a new segment, renamed to
// its number (the directory synced before a record goes into it), their
// old records left in place for the LSN check to reject.

// SegmentSize is the size of a segment, and so the most that one
// record of standard size may take; a larger record gets a segment of its
// own size. A variable for tests.
var SegmentSize int64 = 16 << 20

// MaxSpares is how many recycled or preallocated segments are kept
// ready; the rest are removed.
const MaxSpares = 2

// SegmentName is the file name of segment n.
func SegmentName(n uint64) string { return fmt.Sprintf("%016x.seg", n) }

// parseSegName returns the number of a segment file name.
func parseSegName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// Files is what a listing of the log's directory found.
type Files struct {
	Segs   []uint64 // segment numbers, ascending
	Spares []string // recycled or preallocated segments, by file name
	Temps  []string // files left by a crash while a segment or the mark was made
}

// List lists the log's directory dir.
func List(dir string) (Files, error) {
	var f Files
	ents, err := os.ReadDir(dir)
	if err != nil {
		return f, err
	}
	for _, e := range ents {
		name := e.Name()
		if n, ok := parseSegName(name); ok {
			f.Segs = append(f.Segs, n)
		} else if strings.HasPrefix(name, "spare-") {
			f.Spares = append(f.Spares, name)
		} else if strings.HasSuffix(name, ".tmp") {
			f.Temps = append(f.Temps, name)
		}
	}
	sort.Slice(f.Segs, func(i, j int) bool { return f.Segs[i] < f.Segs[j] })
	return f, nil
}

// CreateSegment makes a new segment file; createSegmentFile, replaced in
// tests.
var CreateSegment = createSegmentFile

// createSegmentFile makes a file of size bytes at path, allocated and
// filled with zeros and fdatasynced, through a temporary name. The caller
// syncs the directory.
func createSegmentFile(dir, name string, size int64) error {
	tmp := filepath.Join(dir, "new-"+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = fillZeros(f, 0, size, true)
	if err == nil {
		err = sysfile.Fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// fillZeros writes zeros over [from, to) of f, allocating the range first
// when allocate is set (a file system without fallocate gets the writes
// alone, which allocate as well).
func fillZeros(f *os.File, from, to int64, allocate bool) error {
	if allocate {
		if err := sysfile.Fallocate(f, from, to-from); err != nil &&
			!errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
			return err
		}
	}
	zeros := make([]byte, min(256<<10, to-from))
	for off := from; off < to; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// zeroTail overwrites with zeros whatever is not zero in f from off to its
// end, and fdatasyncs it when it wrote anything: what follows the log's end
// (a torn record, records past it, a recycled segment's old records) must
// never be read as following a record written later at the same place.
func zeroTail(f *os.File, off int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	last := int64(-1) // the end of the last chunk holding a non-zero byte
	for at := off; at < st.Size(); {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-at)], at)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		for _, b := range buf[:n] {
			if b != 0 {
				last = at + int64(n)
				break
			}
		}
		at += int64(n)
	}
	if last < 0 {
		return nil
	}
	if err := fillZeros(f, off, last, false); err != nil {
		return err
	}
	return datasync(f)
}

// datasync fdatasyncs f; a build with the nosync fault skips it.
func datasync(f *os.File) error {
	if faults.SkipSync {
		return nil
	}
	return sysfile.Fdatasync(f)
}

// syncWALDir syncs the log's directory; a build with the nodirsync fault
// skips it.
func (w *Log) syncDir() error {
	if faults.SkipDirSync {
		return nil
	}
	return w.dirF.Sync()
}

// takeSegment makes segment number n, of at least size bytes, from a spare
// when one is large enough or else a new file, and returns it open, its
// name durable in the directory.
func (w *Log) takeSegment(n uint64, size int64) (*os.File, int64, error) {
	name := filepath.Join(w.dir, SegmentName(n))
	w.mu.Lock()
	var spare string
	for i, s := range w.spares {
		if st, err := os.Stat(filepath.Join(w.dir, s)); err == nil && st.Size() >= size {
			spare = s
			w.spares = append(w.spares[:i:i], w.spares[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
	var err error
	if spare != "" {
		err = os.Rename(filepath.Join(w.dir, spare), name)
	} else {
		err = CreateSegment(w.dir, SegmentName(n), max(size, w.segSize))
	}
	if err == nil {
		err = w.syncDir()
	}
	if err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// recycle turns the segments before segment upTo into spares, or removes
// them past MaxSpares or when they are not of the standard size. Their
// renames need no directory sync: a segment whose rename is lost is still
// before the mark at the next Open, which recycles it again.
func (w *Log) Recycle(upTo uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ; w.oldest < upTo; w.oldest++ {
		path := filepath.Join(w.dir, SegmentName(w.oldest))
		st, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if len(w.spares) < MaxSpares && st.Size() == w.segSize {
			spare := fmt.Sprintf("spare-%016x", w.oldest)
			if err := os.Rename(path, filepath.Join(w.dir, spare)); err != nil {
				return err
			}
			w.spares = append(w.spares, spare)
			w.recycled++
			continue
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// prepareSpare creates a new zero-filled spare when none is ready, so that
// the commit that fills a segment finds its successor ready. It runs in
// the background, off the commit path.
func (w *Log) PrepareSpare() error {
	w.mu.Lock()
	have := len(w.spares)
	w.mu.Unlock()
	if have > 0 {
		return nil
	}
	name := fmt.Sprintf("spare-new-%d", time.Now().UnixNano())
	if err := CreateSegment(w.dir, name, w.segSize); err != nil {
		return err
	}
	w.mu.Lock()
	w.spares = append(w.spares, name)
	w.mu.Unlock()
	return nil
}
