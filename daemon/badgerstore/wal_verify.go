package badgerstore

import (
	"fmt"
	"os"
	"path/filepath"
)

// verifyLog checks the part of the write-ahead log still kept, from the
// start of its oldest segment to the last commit applied: every record
// whole (its CRC32C), its LSN the one after the record before, its payload
// a well-formed commit, and the log reaching that last commit; and that
// the mark is not past the log. It reports each problem through note and
// holds checkpoints (so recycling) off meanwhile.
func (e *engine) verifyLog(note func(problem string)) {
	if e.wal == nil {
		return
	}
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	w := e.wal
	mark, applied := w.positions()
	w.mu.Lock()
	oldest := w.oldest
	w.mu.Unlock()
	if _, found, err := readWALMark(w.dir); err != nil || !found {
		note(fmt.Sprintf("write-ahead log: the mark cannot be read (found %t): %v", found, err))
	}
	if mark.lsn > applied.lsn {
		note(fmt.Sprintf("write-ahead log: the mark (commit %d) is past the last commit applied (%d)", mark.lsn, applied.lsn))
	}
	f, err := os.Open(filepath.Join(w.dir, segName(oldest)))
	if err != nil {
		note(fmt.Sprintf("write-ahead log: its oldest segment %s cannot be read: %v", segName(oldest), err))
		return
	}
	head := make([]byte, walHeaderLen)
	_, err = f.ReadAt(head, 0)
	f.Close()
	if err != nil {
		note(fmt.Sprintf("write-ahead log: segment %s: %v", segName(oldest), err))
		return
	}
	h := readWALHeader(head)
	if h.lsn == 0 && h.crc == 0 {
		if oldest != applied.seg || applied.off != 0 {
			note(fmt.Sprintf("write-ahead log: segment %s begins with zeros but commits up to %d are in the log", segName(oldest), applied.lsn))
		}
		return // nothing written since the log's start
	}
	start := walPos{lsn: h.lsn - 1, seg: oldest}
	if start.lsn > mark.lsn {
		note(fmt.Sprintf("write-ahead log: its oldest record is commit %d, after the mark (%d): the commits between are lost", h.lsn, mark.lsn))
	}
	sc := &walScanner{dir: w.dir, cipher: w.cipher, until: applied.lsn}
	end, _, err := sc.scan(start, func(lsn uint64, payload []byte) error {
		if _, _, err := decodeCommitPayload(payload); err != nil {
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
