package badgerstore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// The write-ahead log is savepointd's own, in front of Badger, in the data
// directory's wal/ (docs/reliability.md, "The commit path"). Each group
// commit is one record, appended to the current segment and made durable by
// one fdatasync of it; only then is it applied to Badger, which is synced
// in the background (checkpoint.go), after which the mark records the LSN
// it covers. Open replays the records after the mark into Badger, checking
// each one's CRC and that its LSN follows the one before: the log ends at
// the first record that fails either, and nothing past it is read.

// WALDir is the log's directory inside the data directory.
const WALDir = "wal"

// wal is the log of one open store. The writer's fields are the
// committer's alone; mu guards the rest, shared with the checkpointer.
type wal struct {
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
	mark     walPos   // the durable mark
	applied  walPos   // the end of the last record applied to Badger

	sinceMark atomic.Int64 // bytes appended since the mark
}

// walOpen is what opening the log found.
type walOpen struct {
	mark     walPos // where replay began
	end      walPos // the end of the last whole record
	replayed int    // records after the mark
	fresh    bool   // no log existed: one was started at Badger's sequence number
	cut      bool   // bytes past the end were zeroed or segments past it removed
}

// openWAL opens the log in dir (created when missing, starting after
// badgerSeq, the sequence number of a store that had no log), reads every
// record after the mark in order, passing each to replay, and leaves the
// writer at the end of the last whole record. Whatever follows it (a torn
// record, stale records of a recycled segment, segments past it) is zeroed
// or removed. The caller makes the replayed records durable in Badger and
// then calls writeMark, before which nothing may be appended.
func openWAL(dir string, key []byte, badgerSeq uint64, replay func(lsn uint64, payload []byte) error) (*wal, walOpen, error) {
	var res walOpen
	w := &wal{dir: dir, segSize: walSegmentSize}
	m, found, err := readWALMark(dir)
	if err != nil {
		return nil, res, err
	}
	if !found {
		if err := w.start(badgerSeq); err != nil {
			return nil, res, fmt.Errorf("starting the write-ahead log in %s: %w", dir, err)
		}
		m, _, err = readWALMark(dir)
		if err != nil {
			return nil, res, err
		}
		res.fresh = true
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
			w.close()
		}
	}()
	res.mark = m.walPos
	sc := &walScanner{dir: dir, cipher: w.cipher}
	end, n, err := sc.scan(m.walPos, func(lsn uint64, payload []byte) error { return replay(lsn, payload) })
	if err != nil {
		return nil, res, err
	}
	res.end, res.replayed = end, n
	if res.cut, err = w.openAt(end, m.seg, m.clean && end == m.walPos); err != nil {
		return nil, res, err
	}
	w.mark, w.applied = m.walPos, end
	ok = true
	return w, res, nil
}

// start creates the directory, the first segment and a mark at lsn: a new
// log, or the first of a store written before there was one (Badger synced
// each of its commits then).
func (w *wal) start(lsn uint64) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	if err := createSegmentFile(w.dir, segName(1), w.segSize); err != nil {
		return err
	}
	salt := make([]byte, walSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	if err := writeWALMark(w.dir, walMark{walPos: walPos{lsn: lsn, seg: 1}, salt: salt}); err != nil {
		return err
	}
	if skipDirSync {
		return nil
	}
	return syncDir(filepath.Dir(w.dir)) // the entry of wal/ itself
}

// openAt leaves the writer at end: the segments before the mark's become
// spares, those after end's are removed, and end's is zeroed past end
// unless clean (Close wrote the mark at end, after the last record: only
// a recycled segment's old records can follow). It says whether anything
// had to be zeroed or removed.
func (w *wal) openAt(end walPos, markSeg uint64, clean bool) (cut bool, err error) {
	files, err := listWAL(w.dir)
	if err != nil {
		return false, err
	}
	for _, t := range files.temps {
		os.Remove(filepath.Join(w.dir, t))
	}
	w.spares = files.spares
	for len(w.spares) > walMaxSpares {
		if err := os.Remove(filepath.Join(w.dir, w.spares[0])); err != nil {
			return false, err
		}
		w.spares = w.spares[1:]
	}
	w.oldest = markSeg
	for _, n := range files.segs {
		switch {
		case n < markSeg:
			w.oldest = min(w.oldest, n)
		case n > end.seg:
			if err := os.Remove(filepath.Join(w.dir, segName(n))); err != nil {
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
	f, err := os.OpenFile(filepath.Join(w.dir, segName(end.seg)), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%w: write-ahead log segment %s, where the log goes on, is missing", ErrDamaged, segName(end.seg))
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
	return cut, w.recycle(markSeg)
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
func (w *wal) writeMark(pos walPos) error { return w.writeMarkClean(pos, false) }

// writeMarkClean writes the mark, clean when nothing is appended after it.
func (w *wal) writeMarkClean(pos walPos, clean bool) error {
	if err := writeWALMark(w.dir, walMark{walPos: pos, epoch: w.epoch, clean: clean, salt: w.salt}); err != nil {
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
func (w *wal) recordBuf() []byte { return append(w.buf[:0], zeroHeader[:]...) }

// append writes the commit record of payload; see appendRecord.
func (w *wal) append(payload []byte) (walPos, error) {
	return w.appendRecord(append(w.recordBuf(), payload...))
}

// appendRecord writes rec, room for a header and a commit payload (from
// recordBuf), as the record of LSN w.next after the last one, sealed with
// the log's key if it has one, moving to a new segment when it does not
// fit, and returns the position after it. It is durable only after sync.
func (w *wal) appendRecord(rec []byte) (walPos, error) {
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
			return walPos{}, err
		}
	}
	if _, err := w.seg.WriteAt(out, w.off); err != nil {
		return walPos{}, fmt.Errorf("write-ahead log: %w", err)
	}
	w.off += need
	w.next++
	w.sinceMark.Add(need)
	return walPos{lsn: w.next - 1, seg: w.segNo, off: w.off}, nil
}

// nextSegment moves the writer to a new segment of at least size bytes: the
// segment is made ready first (its name durable), then the current one ends
// with an end-of-segment record naming the next LSN, synced, so that a
// reader follows it only once it can.
func (w *wal) nextSegment(size int64) error {
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
		return fmt.Errorf("write-ahead log: sync of segment %s: %w", segName(w.segNo), err)
	}
	w.seg.Close()
	w.seg, w.segNo, w.segLen, w.off = f, w.segNo+1, n, 0
	return nil
}

// sync makes every record appended so far durable: one fdatasync of the
// current segment (skipped by the savepoint_nosync build).
func (w *wal) sync() error {
	if err := datasync(w.seg); err != nil {
		return fmt.Errorf("write-ahead log: sync of segment %s: %w", segName(w.segNo), err)
	}
	return nil
}

// setApplied records that every record up to pos is in Badger.
func (w *wal) setApplied(pos walPos) {
	w.mu.Lock()
	w.applied = pos
	w.mu.Unlock()
}

// positions returns the durable mark and the end of the applied records.
func (w *wal) positions() (mark, applied walPos) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mark, w.applied
}

func (w *wal) close() {
	for _, f := range []*os.File{w.seg, w.dirF} {
		if f != nil {
			f.Close()
		}
	}
	w.seg, w.dirF = nil, nil
}
