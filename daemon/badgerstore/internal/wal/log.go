package wal

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
)

// Dir is the log's directory inside the data directory.
const Dir = "wal"

// wal is the log of one open store. The writer's fields are the
// committer's alone; mu guards the rest, shared with the checkpointer.
type Log struct {
	dir     string
	segSize int64
	cipher  *walCipher
	epoch   uint32 // this Open's; durable in the mark before any record is written
	salt    []byte
	dirF    *os.File // the directory, for its syncs

	// The writer.
	seg    *os.File
	segNo  uint64
	segLen int64
	off    int64  // where the next record goes
	next   uint64 // its LSN
	buf    []byte // the record being written
	sealed []byte // its sealed form, with a key

	mu       sync.Mutex
	spares   []string // spare segment files, ready to be renamed into use
	oldest   uint64   // the lowest segment number not yet recycled
	recycled int      // segments recycled since Open, for tests
	mark     Pos      // the durable mark
	applied  Pos      // the end of the last record applied to Badger

	sinceMark atomic.Int64 // bytes appended since the mark
}

// Opened is what opening the log found.
type Opened struct {
	Mark     Pos  // where replay began
	End      Pos  // the end of the last whole record
	Replayed int  // records after the mark
	Fresh    bool // no log existed: one was started at the given LSN
	Cut      bool // bytes past the end were zeroed or segments past it removed
}

// Open opens the log in dir (created when missing, starting after
// badgerSeq, the sequence number of a store that had no log), reads every
// record after the mark in order, passing each to replay, and leaves the
// writer at the end of the last whole record. Whatever follows it (a torn
// record, stale records of a recycled segment, segments past it) is zeroed
// or removed. The caller makes the replayed records durable in Badger and
// then calls writeMark, before which nothing may be appended.
func Open(dir string, key []byte, badgerSeq uint64, replay func(lsn uint64, payload []byte) error) (*Log, Opened, error) {
	var res Opened
	w := &Log{dir: dir, segSize: SegmentSize}
	m, found, err := ReadMark(dir)
	if err != nil {
		return nil, res, err
	}
	if !found {
		if err := w.start(badgerSeq); err != nil {
			return nil, res, fmt.Errorf("starting the write-ahead log in %s: %w", dir, err)
		}
		m, _, err = ReadMark(dir)
		if err != nil {
			return nil, res, err
		}
		res.Fresh = true
	}
	w.salt, w.epoch = m.salt, m.epoch+1
	if w.cipher, err = newWALCipher(key, m.salt); err != nil {
		return nil, res, err
	}
	if w.dirF, err = os.Open(dir); err != nil {
		return nil, res, err
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	res.Mark = m.Pos
	sc := &walScanner{dir: dir, cipher: w.cipher}
	end, n, err := sc.scan(m.Pos, func(lsn uint64, payload []byte) error { return replay(lsn, payload) })
	if err != nil {
		return nil, res, err
	}
	res.End, res.Replayed = end, n
	if res.Cut, err = w.openAt(end, m.seg, m.clean && end == m.Pos); err != nil {
		return nil, res, err
	}
	w.mark, w.applied = m.Pos, end
	ok = true
	return w, res, nil
}

// start creates the directory, the first segment and a mark at lsn: a new
// log, or the first of a store written before there was one (Badger synced
// each of its commits then).
func (w *Log) start(lsn uint64) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	if err := createSegmentFile(w.dir, SegmentName(1), w.segSize); err != nil {
		return err
	}
	salt := make([]byte, walSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	if err := writeMarkFile(w.dir, Mark{Pos: Pos{lsn: lsn, seg: 1}, salt: salt}); err != nil {
		return err
	}
	if faults.SkipDirSync {
		return nil
	}
	return syncDir(filepath.Dir(w.dir)) // the entry of wal/ itself
}

// openAt leaves the writer at end: the segments before the mark's become
// spares, those after end's are removed, and end's is zeroed past end
// unless clean (Close wrote the mark at end, after the last record: only
// a recycled segment's old records can follow). It says whether anything
// had to be zeroed or removed.
func (w *Log) openAt(end Pos, markSeg uint64, clean bool) (cut bool, err error) {
	files, err := List(w.dir)
	if err != nil {
		return false, err
	}
	for _, t := range files.Temps {
		os.Remove(filepath.Join(w.dir, t))
	}
	w.spares = files.Spares
	for len(w.spares) > MaxSpares {
		if err := os.Remove(filepath.Join(w.dir, w.spares[0])); err != nil {
			return false, err
		}
		w.spares = w.spares[1:]
	}
	w.oldest = markSeg
	for _, n := range files.Segs {
		switch {
		case n < markSeg:
			w.oldest = min(w.oldest, n)
		case n > end.seg:
			if err := os.Remove(filepath.Join(w.dir, SegmentName(n))); err != nil {
				return false, err
			}
			cut = true
		}
	}
	if cut {
		if err := w.syncDir(); err != nil {
			return false, err
		}
	}
	f, err := os.OpenFile(filepath.Join(w.dir, SegmentName(end.seg)), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%w: segment %s, where the log goes on, is missing", ErrDamaged, SegmentName(end.seg))
	}
	if err != nil {
		return false, err
	}
	st, err := f.Stat()
	if err == nil && !clean {
		var before int64
		before, err = nonZeroAfter(f, end.off)
		if err == nil && before > 0 {
			cut = true
			err = zeroTail(f, end.off)
		}
	}
	if err != nil {
		f.Close()
		return false, err
	}
	w.seg, w.segNo, w.segLen, w.off, w.next = f, end.seg, st.Size(), end.off, end.lsn+1
	return cut, w.Recycle(markSeg)
}

// nonZeroAfter returns how many bytes after off in f are not zero, counted
// only up to the first one (0 or 1).
func nonZeroAfter(f *os.File, off int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for at := off; ; {
		n, err := f.ReadAt(buf, at)
		for _, b := range buf[:n] {
			if b != 0 {
				return 1, nil
			}
		}
		if n == 0 || err != nil {
			return 0, nil
		}
		at += int64(n)
	}
}

// writeMark makes pos the durable mark (Badger holds every commit up to
// pos.lsn durably) with this Open's epoch.
func (w *Log) WriteMark(pos Pos) error { return w.WriteMarkClean(pos, false) }

// writeMarkClean writes the mark, clean when nothing is appended after it.
func (w *Log) WriteMarkClean(pos Pos, clean bool) error {
	if err := writeMarkFile(w.dir, Mark{Pos: pos, epoch: w.epoch, clean: clean, salt: w.salt}); err != nil {
		return err
	}
	w.mu.Lock()
	w.mark = pos
	w.mu.Unlock()
	return nil
}

// walKeepBuf is the largest record buffer kept between commits: a larger
// one (a big save's) is let go once written.
const walKeepBuf = 1 << 20

var zeroHeader [walHeaderLen]byte

// recordBuf returns the writer's buffer holding room for a record's header,
// for the committer to append the record's payload to, in place.
func (w *Log) RecordBuf() []byte { return append(w.buf[:0], zeroHeader[:]...) }

// append writes the commit record of payload; see appendRecord.
func (w *Log) Append(payload []byte) (Pos, error) {
	return w.AppendRecord(append(w.RecordBuf(), payload...))
}

// appendRecord writes rec, room for a header and a commit payload (from
// recordBuf), as the record of LSN w.next after the last one, sealed with
// the log's key if it has one, moving to a new segment when it does not
// fit, and returns the position after it. It is durable only after sync.
func (w *Log) AppendRecord(rec []byte) (Pos, error) {
	w.buf = rec
	out := rec
	if w.cipher != nil {
		w.sealed = encodeWALRecord(w.sealed[:0], w.cipher, walKindCommit, w.epoch, w.next, rec[walHeaderLen:])
		out = w.sealed
	} else {
		putWALHeader(rec, walHeader{length: uint32(len(rec) - walHeaderLen), lsn: w.next, epoch: w.epoch, kind: walKindCommit})
		sealCRC(rec)
	}
	defer func() {
		if cap(w.buf) > walKeepBuf {
			w.buf = nil
		}
		if cap(w.sealed) > walKeepBuf {
			w.sealed = nil
		}
	}()
	need := int64(len(out))
	if w.off+need+walHeaderLen > w.segLen {
		if err := w.nextSegment(need + 2*walHeaderLen); err != nil {
			return Pos{}, err
		}
	}
	if _, err := w.seg.WriteAt(out, w.off); err != nil {
		return Pos{}, fmt.Errorf("write-ahead log: %w", err)
	}
	w.off += need
	w.next++
	w.sinceMark.Add(need)
	return Pos{lsn: w.next - 1, seg: w.segNo, off: w.off}, nil
}

// nextSegment moves the writer to a new segment of at least size bytes: the
// segment is made ready first (its name durable), then the current one ends
// with an end-of-segment record naming the next LSN, synced, so that a
// reader follows it only once it can.
func (w *Log) nextSegment(size int64) error {
	f, n, err := w.takeSegment(w.segNo+1, size)
	if err != nil {
		return fmt.Errorf("write-ahead log: new segment: %w", err)
	}
	eos := encodeWALRecord(nil, nil, walKindEnd, w.epoch, w.next, nil)
	if _, err := w.seg.WriteAt(eos, w.off); err != nil {
		f.Close()
		return fmt.Errorf("write-ahead log: %w", err)
	}
	if err := datasync(w.seg); err != nil {
		f.Close()
		return fmt.Errorf("write-ahead log: sync of segment %s: %w", SegmentName(w.segNo), err)
	}
	w.seg.Close()
	w.seg, w.segNo, w.segLen, w.off = f, w.segNo+1, n, 0
	return nil
}

// sync makes every record appended so far durable: one fdatasync of the
// current segment (skipped by a build with the nosync fault).
func (w *Log) Sync() error {
	if err := datasync(w.seg); err != nil {
		return fmt.Errorf("write-ahead log: sync of segment %s: %w", SegmentName(w.segNo), err)
	}
	return nil
}

// setApplied records that every record up to pos is in Badger.
func (w *Log) SetApplied(pos Pos) {
	w.mu.Lock()
	w.applied = pos
	w.mu.Unlock()
}

// positions returns the durable mark and the end of the applied records.
func (w *Log) Positions() (mark, applied Pos) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mark, w.applied
}

func (w *Log) Close() {
	for _, f := range []*os.File{w.seg, w.dirF} {
		if f != nil {
			f.Close()
		}
	}
	w.seg, w.dirF = nil, nil
}

// MarkAt moves the writer on after a replay made durable by the caller:
// end, the end of the log Open found, becomes the mark with lsn as its LSN,
// and the next record is lsn+1.
func (w *Log) MarkAt(end Pos, lsn uint64) error {
	end.lsn = lsn
	w.next = lsn + 1
	w.mu.Lock()
	w.applied = end
	w.mu.Unlock()
	return w.WriteMark(end)
}

// SegmentSize is the size of this log's segments of standard size.
func (w *Log) SegmentSize() int64 { return w.segSize }

// SinceMark returns the bytes appended since ResetSinceMark, which a
// checkpoint calls before it syncs.
func (w *Log) SinceMark() int64 { return w.sinceMark.Load() }

// ResetSinceMark sets the count SinceMark returns to zero.
func (w *Log) ResetSinceMark() { w.sinceMark.Store(0) }

// Recycled returns how many segments were recycled since Open.
func (w *Log) Recycled() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recycled
}
