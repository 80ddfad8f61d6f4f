package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/dgraph-io/badger/v4"
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
	_, err := s.db.Backup(w, 0)
	return err
}

// Restore writes the records of a backup made by Backup into s, which must
// hold no records but those Open writes (ErrNotEmpty otherwise), and returns
// how many it wrote. Each batch is durable before the next is read; a
// Restore that fails midway leaves a partial store, to be removed and
// restored again.
func (s *Store) Restore(r io.Reader) (records int, err error) {
	err = s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); !bytes.Equal(k, formatKey) && !bytes.Equal(k, seqKey) {
				return fmt.Errorf("%w: restore into a new, empty data directory", ErrNotEmpty)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
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
			// A key's versions come newest first; only the newest counts, and
			// a deleted key is left out. The engine writes its own sequence
			// number; Badger's internal keys are its own.
			newest := !bytes.Equal(kv.Key, prev)
			prev = kv.Key
			if !newest || (len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0) ||
				bytes.Equal(kv.Key, seqKey) || bytes.HasPrefix(kv.Key, []byte("!badger!")) {
				continue
			}
			w := write{key: kv.Key, val: kv.Value}
			if w.val == nil {
				w.val = []byte{}
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
