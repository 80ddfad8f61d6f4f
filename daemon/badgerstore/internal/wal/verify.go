package wal

import (
	"fmt"
	"os"
	"path/filepath"
)

// Verify checks the part of the log still kept, from the start of its
// oldest segment to the last record applied: every record whole (its
// CRC32C), its LSN the one after the record before, its payload passing
// check, and the log reaching that last record; and that the mark is not
// past the log. It reports each problem through note. The caller holds
// off Recycle and WriteMark meanwhile.
func (w *Log) Verify(check func(payload []byte) error, note func(problem string)) {
	mark, applied := w.Positions()
	w.mu.Lock()
	oldest := w.oldest
	w.mu.Unlock()
	if _, found, err := ReadMark(w.dir); err != nil || !found {
		note(fmt.Sprintf("write-ahead log: the mark cannot be read (found %t): %v", found, err))
	}
	if mark.lsn > applied.lsn {
		note(fmt.Sprintf("write-ahead log: the mark (commit %d) is past the last commit applied (%d)", mark.lsn, applied.lsn))
	}
	f, err := os.Open(filepath.Join(w.dir, SegmentName(oldest)))
	if err != nil {
		note(fmt.Sprintf("write-ahead log: its oldest segment %s cannot be read: %v", SegmentName(oldest), err))
		return
	}
	head := make([]byte, walHeaderLen)
	_, err = f.ReadAt(head, 0)
	f.Close()
	if err != nil {
		note(fmt.Sprintf("write-ahead log: segment %s: %v", SegmentName(oldest), err))
		return
	}
	h := readWALHeader(head)
	if h.lsn == 0 && h.crc == 0 {
		if oldest != applied.seg || applied.off != 0 {
			note(fmt.Sprintf("write-ahead log: segment %s begins with zeros but commits up to %d are in the log", SegmentName(oldest), applied.lsn))
		}
		return // nothing written since the log's start
	}
	start := Pos{lsn: h.lsn - 1, seg: oldest}
	if start.lsn > mark.lsn {
		note(fmt.Sprintf("write-ahead log: its oldest record is commit %d, after the mark (%d): the commits between are lost", h.lsn, mark.lsn))
	}
	sc := &walScanner{dir: w.dir, cipher: w.cipher, until: applied.lsn}
	end, _, err := sc.scan(start, func(lsn uint64, payload []byte) error {
		if err := check(payload); err != nil {
			note(fmt.Sprintf("write-ahead log: commit %d: %v", lsn, err))
		}
		return nil
	})
	switch {
	case err != nil:
		note(fmt.Sprintf("write-ahead log: %v", err))
	case end.lsn < applied.lsn:
		note(fmt.Sprintf("write-ahead log: it ends after commit %d, at %s, but commits up to %d were acknowledged", end.lsn, sc.why, applied.lsn))
	}
}
