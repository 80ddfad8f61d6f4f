package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// A backup file is a header, then frames, each a 4-byte big-endian length
// and that many bytes (with encryption, a 12-byte nonce and the AES-GCM
// sealed chunk of Badger's backup stream, authenticated with the header and
// the frame's index, so frames cannot be dropped, reordered or moved
// between files), then a frame of length 0 and the 8-byte next since
// version.
//
//	magic "SPBACKUP" | version 1 | flags (bit 0: encrypted) | since (8)
const (
	backupMagic     = "SPBACKUP"
	backupVersion   = 1
	backupEncrypted = 1
	backupHeaderLen = len(backupMagic) + 2 + 8
	backupFrame     = 1 << 20 // plaintext bytes per frame
	maxBackupFrame  = backupFrame + 12 + 16
)

// ErrBackupKey is a restore of an encrypted backup file by a store without
// the key it was made with.
var ErrBackupKey = errors.New("the backup is encrypted with another key")

// ErrBackupOrder is a restore of an incremental backup file out of order.
var ErrBackupOrder = errors.New("backup files out of order")

func (s *Store) gcm() (cipher.AEAD, error) {
	block, err := aes.NewCipher(s.key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// BackupSince writes a backup file of the records written at or after
// version since (0: all) to w: a consistent snapshot, taken while the store
// serves. An encrypted store's file is encrypted with its key; a store
// without a key writes a plaintext file only when plaintext is set
// (core.ErrPlaintextBackup otherwise).
func (s *Store) BackupSince(ctx context.Context, w io.Writer, since uint64, plaintext bool) (core.BackupResult, error) {
	if err := ctx.Err(); err != nil {
		return core.BackupResult{}, err
	}
	res := core.BackupResult{Encrypted: len(s.key) > 0}
	if !res.Encrypted && !plaintext {
		return res, fmt.Errorf("%w: this store has no encryption key (--encryption-key-file), so its backup would be plaintext; set plaintext to accept that", core.ErrPlaintextBackup)
	}
	header := make([]byte, 0, backupHeaderLen)
	header = append(header, backupMagic...)
	header = append(header, backupVersion, 0)
	if res.Encrypted {
		header[len(backupMagic)+1] = backupEncrypted
	}
	header = binary.BigEndian.AppendUint64(header, since)
	if _, err := w.Write(header); err != nil {
		return res, err
	}
	fw := &frameWriter{w: w, header: header}
	if res.Encrypted {
		aead, err := s.gcm()
		if err != nil {
			return res, err
		}
		fw.aead = aead
	}
	bw := bufio.NewWriterSize(fw, backupFrame)
	next, err := s.snapshotBackup(ctx, bw, since)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return res, err
	}
	res.Next = next
	end := binary.BigEndian.AppendUint32(nil, 0)
	_, err = w.Write(binary.BigEndian.AppendUint64(end, res.Next))
	return res, err
}

// snapshotBackup writes, in the stream format of Badger's backup, the
// newest version of every key changed at or after version since, a deleted
// one as a delete marker when since > 0, all from one read transaction, and
// returns the since version of the next backup. Badger's own DB.Backup reads
// each key range in a transaction of its own, so a backup taken while
// writes go on would mix moments (a head without the messages it names).
func (s *Store) snapshotBackup(ctx context.Context, w io.Writer, since uint64) (uint64, error) {
	txn := s.readTxn()
	defer s.discardReadTxn(txn)
	opts := badger.IteratorOptions{AllVersions: true, PrefetchValues: true, PrefetchSize: 100}
	if since > 0 {
		opts.SinceTs = since - 1 // Badger reads versions above SinceTs
	}
	it := txn.NewIterator(opts)
	defer it.Close()
	var list pb.KVList
	size := 0
	flush := func() error {
		if len(list.Kv) == 0 {
			return nil
		}
		b, err := proto.Marshal(&list)
		if err != nil {
			return err
		}
		if _, err := w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b)))); err != nil {
			return err
		}
		_, err = w.Write(b)
		list.Kv, size = list.Kv[:0], 0
		return err
	}
	var prev []byte
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if bytes.Equal(item.Key(), prev) || item.Version() < since {
			continue // an older version: the newest one was written
		}
		prev = item.KeyCopy(prev[:0])
		kv := &pb.KV{Key: item.KeyCopy(nil), Version: item.Version()}
		if item.IsDeletedOrExpired() {
			if since == 0 {
				continue
			}
			kv.Meta = []byte{badgerBitDelete}
		} else {
			v, err := item.ValueCopy(nil)
			if err != nil {
				return 0, err
			}
			kv.Value = v
		}
		list.Kv = append(list.Kv, kv)
		if size += len(kv.Key) + len(kv.Value); size >= backupFrame {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	return txn.ReadTs() + 1, flush()
}

type frameWriter struct {
	w      io.Writer
	aead   cipher.AEAD // nil: plaintext
	header []byte
	index  uint64
}

func (f *frameWriter) aad() []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, f.header...), f.index)
}

func (f *frameWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += backupFrame {
		chunk := p[off:min(off+backupFrame, len(p))]
		payload := chunk
		if f.aead != nil {
			nonce := make([]byte, f.aead.NonceSize())
			if _, err := rand.Read(nonce); err != nil {
				return off, err
			}
			payload = f.aead.Seal(nonce, nonce, chunk, f.aad())
		}
		if _, err := f.w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(payload)))); err != nil {
			return off, err
		}
		if _, err := f.w.Write(payload); err != nil {
			return off, err
		}
		f.index++
	}
	return len(p), nil
}

// frameReader reads the Badger stream back out of a backup file's frames.
type frameReader struct {
	r      io.Reader
	aead   cipher.AEAD
	header []byte
	index  uint64
	buf    []byte
	done   bool
	next   uint64 // the trailer, once done
}

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.done {
			return 0, io.EOF
		}
		var n uint32
		if err := binary.Read(f.r, binary.BigEndian, &n); err != nil {
			return 0, fmt.Errorf("read backup: %w (the file is cut short)", noEOF(err))
		}
		if n == 0 {
			if err := binary.Read(f.r, binary.BigEndian, &f.next); err != nil {
				return 0, fmt.Errorf("read backup: %w (the file is cut short)", noEOF(err))
			}
			f.done = true
			continue
		}
		if n > maxBackupFrame {
			return 0, fmt.Errorf("read backup: a %d-byte frame: the file is damaged", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(f.r, payload); err != nil {
			return 0, fmt.Errorf("read backup: %w (the file is cut short)", noEOF(err))
		}
		if f.aead != nil {
			ns := f.aead.NonceSize()
			if len(payload) < ns {
				return 0, fmt.Errorf("read backup: a frame shorter than its nonce: the file is damaged")
			}
			aad := binary.BigEndian.AppendUint64(append([]byte{}, f.header...), f.index)
			plain, err := f.aead.Open(nil, payload[:ns], payload[ns:], aad)
			if err != nil {
				return 0, fmt.Errorf("%w, or the file is damaged (frame %d does not authenticate)", ErrBackupKey, f.index)
			}
			payload = plain
		}
		f.index++
		f.buf = payload
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// restoreFile restores a backup file made by BackupSince. A full backup
// (since 0) needs an empty store; an incremental one, the store a restore
// left at exactly its since version.
func (s *Store) restoreFile(br *bufio.Reader) (int, error) {
	header := make([]byte, backupHeaderLen)
	if _, err := io.ReadFull(br, header); err != nil {
		return 0, fmt.Errorf("read backup: %w", noEOF(err))
	}
	if header[len(backupMagic)] != backupVersion {
		return 0, fmt.Errorf("read backup: file version %d; this savepointd reads version %d", header[len(backupMagic)], backupVersion)
	}
	since := binary.BigEndian.Uint64(header[len(backupMagic)+2:])
	fr := &frameReader{r: br, header: header}
	if header[len(backupMagic)+1]&backupEncrypted != 0 {
		if len(s.key) == 0 {
			return 0, fmt.Errorf("%w: it is encrypted; restore with --encryption-key-file naming the key of the store it was made from", ErrBackupKey)
		}
		aead, err := s.gcm()
		if err != nil {
			return 0, err
		}
		fr.aead = aead
	}
	var at storagev1.RestoredRecord
	if err := s.view(context.Background(), func(t *tx) error {
		_, err := get(t, nil, "", restoredKey, &at)
		return err
	}); err != nil {
		return 0, err
	}
	switch {
	case since == 0:
		if err := s.checkEmpty(); err != nil {
			return 0, err
		}
	case at.NextSinceVersion == 0:
		return 0, fmt.Errorf("%w: this is an incremental backup (since version %d); restore the full backup first", ErrBackupOrder, since)
	case at.NextSinceVersion != since:
		return 0, fmt.Errorf("%w: this incremental backup starts at version %d, the store is restored up to %d; restore the files in the order they were made",
			ErrBackupOrder, since, at.NextSinceVersion)
	}
	n, err := s.restoreStream(fr, since > 0)
	if err != nil {
		return n, err
	}
	if !fr.done {
		return n, fmt.Errorf("read backup: %w (no end frame)", io.ErrUnexpectedEOF)
	}
	return n, s.update(func(t *tx) error {
		return put(t, restoredKey, &storagev1.RestoredRecord{NextSinceVersion: fr.next})
	})
}

func (s *Store) checkEmpty() error {
	return s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); !bytes.Equal(k, formatKey) && !bytes.Equal(k, seqKey) {
				return fmt.Errorf("%w: restore into a new, empty data directory", ErrNotEmpty)
			}
		}
		return nil
	})
}
