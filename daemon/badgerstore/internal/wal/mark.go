package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/savepoint-dev/savepoint/daemon/internal/faults"
)

// The mark is the file wal/mark: the LSN up to which Badger holds every
// commit durably, and where the record after it starts, written only after
// a db.Sync that covered that LSN; with the log's salt and the epoch of
// the Open that wrote it. Open replays the log from the mark, and only
// segments wholly before the mark's segment are recycled. A mark written by
// Close, after the last record, is clean: nothing follows it in the log.
//
//	"SPWALMK1" | lsn (8) | segment (8) | offset (8) | epoch (4) | clean (1) | salt (16) | crc32c (4)
const (
	walMarkFile  = "mark"
	walMarkMagic = "SPWALMK1"
	walMarkLen   = 8 + 8 + 8 + 8 + 4 + 1 + 16 + 4
	walSaltLen   = 16
)

// Pos is a place in the log: every record up to lsn comes before it, and
// the record lsn+1 starts at offset off of segment seg.
type Pos struct {
	lsn uint64
	seg uint64
	off int64
}

// LSN returns the LSN of the last record before p.
func (p Pos) LSN() uint64 { return p.lsn }

// Segment returns the number of the segment p is in.
func (p Pos) Segment() uint64 { return p.seg }

// Offset returns where in its segment p is.
func (p Pos) Offset() int64 { return p.off }

// Mark is the mark file's contents.
type Mark struct {
	Pos
	epoch uint32
	clean bool
	salt  []byte
}

func encodeWALMark(m Mark) []byte {
	b := make([]byte, 0, walMarkLen)
	b = append(b, walMarkMagic...)
	b = binary.LittleEndian.AppendUint64(b, m.lsn)
	b = binary.LittleEndian.AppendUint64(b, m.seg)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.off))
	b = binary.LittleEndian.AppendUint32(b, m.epoch)
	if m.clean {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, m.salt...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ReadMark returns the mark in dir; found is false when there is none.
func ReadMark(dir string) (m Mark, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, walMarkFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if len(b) != walMarkLen || string(b[:8]) != walMarkMagic ||
		binary.LittleEndian.Uint32(b[walMarkLen-4:]) != crc32.Checksum(b[:walMarkLen-4], castagnoli) {
		return m, false, fmt.Errorf("the write-ahead log's mark %s is damaged", filepath.Join(dir, walMarkFile))
	}
	m.lsn = binary.LittleEndian.Uint64(b[8:])
	m.seg = binary.LittleEndian.Uint64(b[16:])
	m.off = int64(binary.LittleEndian.Uint64(b[24:]))
	m.epoch = binary.LittleEndian.Uint32(b[32:])
	m.clean = b[36] == 1
	m.salt = append([]byte(nil), b[37:37+walSaltLen]...)
	return m, true, nil
}

// writeMarkFile replaces the mark in dir atomically and durably: a
// temporary file, synced, renamed over the mark, and the directory synced
// (skipped only by a build with the nodirsync fault).
func writeMarkFile(dir string, m Mark) error {
	path := filepath.Join(dir, walMarkFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeWALMark(m))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil && !faults.SkipDirSync {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing the write-ahead log's mark: %w", err)
	}
	return nil
}
