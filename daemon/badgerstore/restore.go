package badgerstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// badgerBitDelete is Badger's meta bit of a deleted version (bitDelete).
const badgerBitDelete = 1

// ErrNotEmpty is returned by Restore when the store already holds sessions.
var ErrNotEmpty = errors.New("the store is not empty")

// Backup writes every record of the store to w in Badger's backup format.
// The backup is not encrypted, whatever the store's key: keep it as safe as
// the key. Restore reads it back, into a store with any key or none.
func (s *Store) Backup(w io.Writer) error {
	v := s.eng.snaps.open()
	defer s.eng.snaps.close(v)
	stream := s.db.NewStreamAt(v) // every range read at one version
	stream.LogPrefix = "Backup"
	_, err := stream.Backup(w, 0)
	return err
}

// Restore writes the records of a backup into s and returns how many it
// wrote. It reads a backup file of BackupSince (a full one into a store
// holding no records but those Open writes, ErrNotEmpty otherwise; an
// incremental one into the store the restores before it left, in order,
// ErrBackupOrder otherwise; an encrypted one with the key it was made with,
// ErrBackupKey otherwise), or Backup's plaintext stream, into an empty
// store. Each batch is durable before the next is read; a Restore that
// fails midway leaves a partial store, to be removed and restored again.
func (s *Store) Restore(r io.Reader) (records int, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	if magic, _ := br.Peek(len(backupMagic)); string(magic) == backupMagic {
		return s.restoreFile(br)
	}
	if err := s.checkEmpty(); err != nil {
		return 0, err
	}
	return s.restoreStream(br, false)
}

// restoreStream writes the records of Badger's backup stream. A key's
// newest version counts; a deleted one is deleted when deletes is set (an
// incremental backup) and left out otherwise.
func (s *Store) restoreStream(r io.Reader, deletes bool) (records int, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var batch []write
	var size int64
	var prev []byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.eng.commit(batch)
		batch, size = nil, 0
		return err
	}
	for {
		var n uint64
		if err := binary.Read(br, binary.LittleEndian, &n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return records, fmt.Errorf("read backup: %w", err)
		}
		if n > 1<<30 {
			return records, fmt.Errorf("read backup: a %d-byte record list: this is not a savepointd backup", n)
		}
		// Read what is there rather than allocate what the length claims.
		buf, err := io.ReadAll(io.LimitReader(br, int64(n)))
		if err != nil {
			return records, fmt.Errorf("read backup: %w", err)
		}
		if uint64(len(buf)) != n {
			return records, fmt.Errorf("read backup: %w: the file ends inside a record list", io.ErrUnexpectedEOF)
		}
		var list pb.KVList
		if err := proto.Unmarshal(buf, &list); err != nil {
			return records, fmt.Errorf("read backup: %w", err)
		}
		for _, kv := range list.Kv {
			// A key's versions come newest first; only the newest counts. The
			// engine writes its own sequence number and restore record;
			// Badger's internal keys are its own.
			newest := !bytes.Equal(kv.Key, prev)
			prev = kv.Key
			deleted := len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0
			if !newest || (deleted && !deletes) || bytes.Equal(kv.Key, seqKey) || bytes.Equal(kv.Key, restoredKey) ||
				bytes.HasPrefix(kv.Key, []byte("!badger!")) {
				continue
			}
			w := write{key: kv.Key, val: kv.Value}
			if w.val == nil && !deleted {
				w.val = []byte{}
			}
			if deleted {
				w.val = nil
			}
			ws := int64(len(w.key) + len(w.val) + entryOverhead)
			if size+ws > s.eng.maxSize/2 || int64(len(batch)) >= s.eng.maxCount/2 {
				if err := flush(); err != nil {
					return records, err
				}
			}
			batch = append(batch, w)
			size += ws
			records++
		}
	}
	return records, flush()
}
