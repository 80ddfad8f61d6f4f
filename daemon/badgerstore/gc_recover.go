package badgerstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/y"
)

// A value-log GC moves each live value of the file it collects to the head
// of the value log, under the same key and version, and savepointd syncs
// the moves only once Badger has ended the rewrite (collectValueLog).
// Meanwhile Badger may flush a memtable holding moved keys and a
// compaction may sync the directory, so that after a power cut a key can
// point at a moved value that was never synced (defect 18 of
// docs/reliability.md). The collected file itself is still there: Badger
// deletes it only once the iterator collectValueLog holds is closed, after
// the moves are durable. So GCFile is written, durably, before a GC and
// removed after its moves are synced, and an Open that finds it reads every
// value once the write-ahead log is replayed (which gives back the commits
// a cut lost the same way), and writes each it cannot read back from the
// copy a value-log file still holds, at its key and version.

// GCFile in the data directory exists while a value-log GC may have moved
// values that are not yet durable; Open then recovers them
// (recoverMovedValues).
const GCFile = "savepoint.gc"

// beginGC writes GCFile in dir, durably, before a value-log GC.
func beginGC(dir string) error {
	return replaceFile(dir, GCFile, nil)
}

// endGC removes GCFile from dir once the GC's moves are durable.
func endGC(dir string) error {
	if err := os.Remove(filepath.Join(dir, GCFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(dir)
}

// recoverMoves recovers, when GCFile is in dir, the values an interrupted
// value-log GC moved (recoverMovedValues) and logs what it did.
func (s *Store) recoverMoves(dir string, encryptionKey []byte) error {
	recovered, lost, err := recoverMovedValues(s.db, dir, encryptionKey)
	if err != nil {
		return fmt.Errorf("recovering the values a value-log GC was moving at the last stop: %w", err)
	}
	if recovered > 0 {
		s.log.Warn("wrote back the values a value-log GC was moving when the power was cut (docs/reliability.md, defect 18)",
			"recovered", recovered)
	}
	if lost > 0 {
		s.log.Error("values found damaged after a value-log GC was interrupted, with no intact copy in any value-log file: savepointd verify lists their sessions",
			"without_a_copy", lost)
	}
	return nil
}

// recoverMovedValues runs at Open, once the write-ahead log's replay has
// given back every commit it holds and before the engine starts, when
// GCFile is in dir: it finds every value that cannot be read or fails its
// checksum, writes back at its key and version the intact copy a value-log
// file of dir holds, syncs, and removes GCFile. It returns how many values
// it recovered and how many it found damaged with no intact copy (left as
// they are, for Verify to report). encryptionKey is the store's, nil when
// it has none.
func recoverMovedValues(db *badger.DB, dir string, encryptionKey []byte) (recovered, lost int, err error) {
	if _, err := os.Stat(filepath.Join(dir, GCFile)); errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	} else if err != nil {
		return 0, 0, err
	}
	if damaged := unreadableValues(db); len(damaged) > 0 {
		copies, err := valueLogCopies(dir, encryptionKey, damaged)
		if err != nil {
			return 0, 0, err
		}
		wb := db.NewManagedWriteBatch()
		for k, version := range damaged {
			val, ok := copies[k]
			if !ok {
				lost++
				continue
			}
			if err := wb.SetEntryAt(badger.NewEntry(y.ParseKey([]byte(k)), val), version); err != nil {
				wb.Cancel()
				return 0, 0, err
			}
			recovered++
		}
		if err := wb.Flush(); err != nil {
			return 0, 0, err
		}
		if err := db.Sync(); err != nil {
			return 0, 0, err
		}
	}
	return recovered, lost, endGC(dir)
}

// unreadableValues returns, by Badger's key (the key and its version,
// y.KeyWithTs), the version of every stored value, of any version, that
// Badger cannot read or whose frame (codec.go) fails.
func unreadableValues(db *badger.DB) map[string]uint64 {
	txn := db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{AllVersions: true})
	defer it.Close()
	damaged := map[string]uint64{}
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if item.IsDeletedOrExpired() || bytes.Equal(item.Key(), seqKey) {
			continue
		}
		err := item.Value(func(v []byte) error { return checkFrame(item.Key(), v) })
		if err != nil {
			damaged[string(y.KeyWithTs(item.KeyCopy(nil), item.Version()))] = item.Version()
		}
	}
	return damaged
}

// valueLogCopies reads every value-log file of dir and returns, for each
// key of want, the value of an entry of that key and version whose frame
// holds.
func valueLogCopies(dir string, encryptionKey []byte, want map[string]uint64) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var kr *badger.KeyRegistry
	if len(encryptionKey) > 0 {
		if kr, err = badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: dir, ReadOnly: true, EncryptionKey: encryptionKey}); err != nil {
			return nil, err
		}
		defer kr.Close()
	}
	found := map[string][]byte{}
	for _, name := range names {
		err := scanValueLog(name, kr, func(_ int64, key, val []byte) {
			if _, ok := want[string(key)]; ok && checkFrame(y.ParseKey(key), val) == nil {
				found[string(key)] = bytes.Clone(val)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return found, nil
}

// vlogHeaderSize is the size of a value-log file's header: the id of the
// data key that encrypts it (0: none) and the base of its entries' IVs.
const vlogHeaderSize = 20

// scanValueLog calls fn with the offset, the key (with its version) and
// the value of each entry of the value-log file at path, in order, up to its first
// entry that is zero, cut short or fails its CRC. kr holds the data keys
// of an encrypted store, nil otherwise. The layout is Badger v4's
// (logFile.encodeEntry): per entry meta, user meta, then the key's length,
// the value's length and the expiry as uvarints, then the key and value
// (AES-CTR encrypted from the base IV and the entry's offset, when the file
// is), then a big-endian CRC32C of all of them as written.
func scanValueLog(path string, kr *badger.KeyRegistry, fn func(offset int64, key, val []byte)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	r := &headerReader{r: bufio.NewReaderSize(f, 1<<20)}
	var fh [vlogHeaderSize]byte
	if _, err := io.ReadFull(r.r, fh[:]); err != nil {
		return nil // too short to hold an entry
	}
	var dataKey []byte
	if id := binary.BigEndian.Uint64(fh[:8]); id != 0 {
		if kr == nil {
			return fmt.Errorf("encrypted with data key %d, and no encryption key is given", id)
		}
		dk, err := kr.DataKey(id)
		if err != nil {
			return err
		}
		dataKey = dk.Data
	}
	for offset := int64(vlogHeaderSize); ; {
		r.header = r.header[:0]
		_, err1 := r.ReadByte() // meta
		_, err2 := r.ReadByte() // user meta
		klen, err3 := binary.ReadUvarint(r)
		vlen, err4 := binary.ReadUvarint(r)
		_, err5 := binary.ReadUvarint(r) // expiry
		end := offset + int64(len(r.header)) + int64(klen) + int64(vlen) + crc32.Size
		if errors.Join(err1, err2, err3, err4, err5) != nil || klen <= 8 || klen > math.MaxUint16 || vlen > math.MaxUint32 || end > fi.Size() {
			return nil // the end: a zeroed, torn or cut short entry
		}
		kv := make([]byte, klen+vlen+crc32.Size)
		if _, err := io.ReadFull(r.r, kv); err != nil {
			return nil
		}
		sum := crc32.Update(crc32.Checksum(r.header, castagnoli), castagnoli, kv[:klen+vlen])
		if binary.BigEndian.Uint32(kv[klen+vlen:]) != sum {
			return nil
		}
		kv = kv[:klen+vlen]
		if dataKey != nil {
			iv := make([]byte, 16)
			copy(iv, fh[8:])
			binary.BigEndian.PutUint32(iv[12:], uint32(offset))
			if kv, err = y.XORBlockAllocate(kv, dataKey, iv); err != nil {
				return err
			}
		}
		fn(offset, kv[:klen], kv[klen:])
		offset = end
	}
}

// headerReader reads an entry's header a byte at a time (for
// binary.ReadUvarint) and keeps its bytes, which the entry's CRC covers.
type headerReader struct {
	r      *bufio.Reader
	header []byte
}

func (h *headerReader) ReadByte() (byte, error) {
	b, err := h.r.ReadByte()
	if err == nil {
		h.header = append(h.header, b)
	}
	return b, err
}
