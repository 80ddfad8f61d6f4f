package wal

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// walScanner reads the log's records in order from a position. It takes a
// record only when its header fits, its CRC32C matches and its LSN is the
// one expected next; the first record that fails ends the log, so neither a
// torn record nor anything written after it, nor an old record left in a
// recycled segment (whose CRC is good but whose LSN is from before), is
// ever taken.
type walScanner struct {
	dir    string
	cipher *walCipher
	until  uint64 // when not 0, the scan ends once it took the record of this LSN
	buf    []byte // the record read last
	// why says why the last scan ended, for savepointd verify.
	why string
}

// scan passes each record after from to fn, in order, and returns the
// position after the last one taken and how many were taken. An error of
// fn, or one reading a segment that exists, ends the scan with that error.
// The payload passed to fn is valid only until fn returns. Records are
// read one at a time, never a whole segment into memory.
func (sc *walScanner) scan(from Pos, fn func(lsn uint64, payload []byte) error) (Pos, int, error) {
	pos := from
	taken := 0
	if sc.until > 0 && pos.lsn >= sc.until {
		return pos, 0, nil
	}
	seg, err := sc.openSegment(pos.seg)
	if err != nil {
		return pos, 0, err
	}
	if seg == nil {
		sc.why = fmt.Sprintf("segment %s is missing", SegmentName(pos.seg))
		return pos, 0, nil
	}
	defer func() { seg.Close() }()
	for {
		rec, h, why, err := sc.record(seg, pos)
		if err != nil {
			return pos, taken, err
		}
		if why != "" {
			sc.why = why
			return pos, taken, nil
		}
		if h.kind == walKindEnd {
			next, err := sc.openSegment(pos.seg + 1)
			if err != nil {
				return pos, taken, err
			}
			if next == nil {
				sc.why = fmt.Sprintf("segment %s ends, and segment %s is missing", SegmentName(pos.seg), SegmentName(pos.seg+1))
				return pos, taken, nil
			}
			if _, _, why, err := sc.record(next, Pos{lsn: pos.lsn, seg: pos.seg + 1}); why != "" || err != nil {
				// The next segment was made ready but holds no record yet:
				// the log ends at this end-of-segment record.
				next.Close()
				sc.why = why
				return pos, taken, err
			}
			seg.Close()
			seg, pos = next, Pos{lsn: pos.lsn, seg: pos.seg + 1}
			continue
		}
		payload, err := openWALPayload(sc.cipher, h, rec)
		if err != nil {
			return pos, taken, fmt.Errorf("%w: segment %s at %d: %v", ErrDamaged, SegmentName(pos.seg), pos.off, err)
		}
		if err := fn(h.lsn, payload); err != nil {
			return pos, taken, err
		}
		taken++
		pos = Pos{lsn: h.lsn, seg: pos.seg, off: pos.off + int64(len(rec))}
		if sc.until > 0 && pos.lsn >= sc.until {
			return pos, taken, nil
		}
	}
}

// walSegmentFile is a segment open for reading.
type walSegmentFile struct {
	*os.File
	size int64
}

// record reads the record at pos in seg, the segment pos.seg, or says why
// there is none: the log ends there. The record is valid until the next
// call.
func (sc *walScanner) record(seg *walSegmentFile, pos Pos) ([]byte, walHeader, string, error) {
	at := fmt.Sprintf("segment %s at offset %d", SegmentName(pos.seg), pos.off)
	if pos.off+walHeaderLen > seg.size {
		return nil, walHeader{}, "no room for a record header at " + at, nil
	}
	sc.buf = append(sc.buf[:0], zeroHeader[:]...)
	if _, err := seg.ReadAt(sc.buf, pos.off); err != nil {
		return nil, walHeader{}, "", fmt.Errorf("reading write-ahead log %s: %w", at, err)
	}
	h := readWALHeader(sc.buf)
	if h.crc == 0 && h.length == 0 && h.lsn == 0 && h.kind == 0 {
		return nil, h, "zeros at " + at, nil
	}
	end := pos.off + walHeaderLen + int64(h.length)
	if end > seg.size || (h.kind == walKindEnd && h.length != 0) || (h.kind != walKindEnd && h.kind != walKindCommit) {
		return nil, h, "no whole record at " + at, nil
	}
	sc.buf = slices.Grow(sc.buf, int(h.length))[:walHeaderLen+int(h.length)]
	if _, err := seg.ReadAt(sc.buf[walHeaderLen:], pos.off+walHeaderLen); err != nil {
		return nil, h, "", fmt.Errorf("reading write-ahead log %s: %w", at, err)
	}
	rec := sc.buf
	if h.crc != crcOf(rec) {
		return nil, h, "a record whose CRC does not match (torn) at " + at, nil
	}
	if h.lsn != pos.lsn+1 {
		return nil, h, fmt.Sprintf("a record of LSN %d where %d was due (left from the segment's earlier use) at %s", h.lsn, pos.lsn+1, at), nil
	}
	return rec, h, "", nil
}

func crcOf(rec []byte) uint32 { return crc32.Checksum(rec[4:], castagnoli) }

// openSegment opens segment n, or returns nil when it does not exist.
func (sc *walScanner) openSegment(n uint64) (*walSegmentFile, error) {
	f, err := os.Open(filepath.Join(sc.dir, SegmentName(n)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			return &walSegmentFile{File: f, size: st.Size()}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("reading write-ahead log segment %s: %w", SegmentName(n), err)
}
