package badgerstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A record of the write-ahead log is a 24-byte header and a payload:
//
//	crc32c (4) | payload length (4) | LSN (8) | epoch (4) | kind (1) | flags (1) | 0 (2) | payload
//
// The CRC32C covers everything after itself, the payload as stored (sealed
// when the log is encrypted). A commit record's payload is the commit's
// Badger version and its writes; an end-of-segment record has no payload
// and carries the LSN of the record that follows at the start of the next
// segment. The epoch is the number of the Open that wrote the record; with
// a key it makes the nonce (epoch, LSN) unique even when an LSN is written
// again after a torn tail was cut.
const (
	walHeaderLen = 24

	walKindCommit = 1
	walKindEnd    = 2 // end of segment: the record with this LSN is at the start of the next one

	walFlagSealed = 1
)

// walHeader is a record's header, decoded.
type walHeader struct {
	crc    uint32
	length uint32
	lsn    uint64
	epoch  uint32
	kind   byte
	flags  byte
}

func putWALHeader(b []byte, h walHeader) {
	binary.LittleEndian.PutUint32(b[4:], h.length)
	binary.LittleEndian.PutUint64(b[8:], h.lsn)
	binary.LittleEndian.PutUint32(b[16:], h.epoch)
	b[20], b[21], b[22], b[23] = h.kind, h.flags, 0, 0
}

func readWALHeader(b []byte) walHeader {
	return walHeader{
		crc:    binary.LittleEndian.Uint32(b),
		length: binary.LittleEndian.Uint32(b[4:]),
		lsn:    binary.LittleEndian.Uint64(b[8:]),
		epoch:  binary.LittleEndian.Uint32(b[16:]),
		kind:   b[20],
		flags:  b[21],
	}
}

// sealCRC sets the CRC of the record rec (header and payload).
func sealCRC(rec []byte) {
	binary.LittleEndian.PutUint32(rec, crc32.Checksum(rec[4:], castagnoli))
}

// walCipher encrypts commit payloads with AES-GCM under a key derived from
// the store's key and the log's random salt, so that two logs under one key
// (a directory and the one a backup was restored into) never share a key
// stream. The nonce is the record's epoch and LSN, never its place in a
// segment: a segment is reused, and a place rewritten, far more often than
// an (epoch, LSN) pair, which never repeats within one log.
type walCipher struct{ aead cipher.AEAD }

func newWALCipher(key, salt []byte) (*walCipher, error) {
	if len(key) == 0 {
		return nil, nil
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("savepoint write-ahead log\x00"))
	mac.Write(salt)
	block, err := aes.NewCipher(mac.Sum(nil)[:len(key)])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &walCipher{aead: aead}, nil
}

// walNonce is the nonce of the record (epoch, lsn).
func walNonce(epoch uint32, lsn uint64) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint32(n, epoch)
	binary.BigEndian.PutUint64(n[4:], lsn)
	return n
}

// encodeWALRecord appends to dst the record of lsn written in epoch with
// payload, sealed when c is not nil.
func encodeWALRecord(dst []byte, c *walCipher, kind byte, epoch uint32, lsn uint64, payload []byte) []byte {
	h := walHeader{lsn: lsn, epoch: epoch, kind: kind, length: uint32(len(payload))}
	if c != nil && kind == walKindCommit {
		h.flags = walFlagSealed
		h.length += uint32(c.aead.Overhead())
	}
	start := len(dst)
	dst = append(dst, make([]byte, walHeaderLen)...)
	putWALHeader(dst[start:], h)
	if h.flags&walFlagSealed != 0 {
		// The header (less its CRC) is authenticated with the payload.
		dst = c.aead.Seal(dst, walNonce(epoch, lsn), payload, dst[start+4:start+walHeaderLen])
	} else {
		dst = append(dst, payload...)
	}
	sealCRC(dst[start:])
	return dst
}

var errWALSealed = errors.New("the record is encrypted and the store has no key")

// openWALPayload returns the plaintext payload of the record rec, whose
// CRC was checked.
func openWALPayload(c *walCipher, h walHeader, rec []byte) ([]byte, error) {
	payload := rec[walHeaderLen:]
	if h.flags&walFlagSealed == 0 {
		return payload, nil
	}
	if c == nil {
		return nil, errWALSealed
	}
	plain, err := c.aead.Open(nil, walNonce(h.epoch, h.lsn), payload, rec[4:walHeaderLen])
	if err != nil {
		return nil, fmt.Errorf("record %d does not authenticate with this key: %w", h.lsn, err)
	}
	return plain, nil
}

// A commit payload: the Badger version (8), the number of writes (uvarint),
// and each write: 0 for a set or 1 for a delete, the key's length (uvarint)
// and key, and for a set the value's length (uvarint) and value.

// appendCommitPayload appends the payload of a commit at version of the
// writes of batch.
func appendCommitPayload(dst []byte, version uint64, batch []*op) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, version)
	n := 0
	for _, o := range batch {
		n += len(o.writes)
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, o := range batch {
		for _, w := range o.writes {
			if w.val == nil {
				dst = append(dst, 1)
				dst = binary.AppendUvarint(dst, uint64(len(w.key)))
				dst = append(dst, w.key...)
				continue
			}
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, uint64(len(w.key)))
			dst = append(dst, w.key...)
			dst = binary.AppendUvarint(dst, uint64(len(w.val)))
			dst = append(dst, w.val...)
		}
	}
	return dst
}

// commitPayloadSize bounds the payload appendCommitPayload writes for ops.
func commitPayloadSize(ws []write) int {
	n := 8 + binary.MaxVarintLen64
	for _, w := range ws {
		n += 1 + 2*binary.MaxVarintLen64 + len(w.key) + len(w.val)
	}
	return n
}

// decodeCommitPayload returns the version and writes of a commit payload;
// keys and values alias p.
func decodeCommitPayload(p []byte) (uint64, []write, error) {
	bad := func(what string) (uint64, []write, error) {
		return 0, nil, fmt.Errorf("malformed commit record: %s", what)
	}
	if len(p) < 8 {
		return bad("no version")
	}
	version := binary.LittleEndian.Uint64(p)
	p = p[8:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return bad("no write count")
	}
	p = p[k:]
	ws := make([]write, 0, n)
	field := func() ([]byte, bool) {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)-k) {
			return nil, false
		}
		b := p[k : k+int(l) : k+int(l)]
		p = p[k+int(l):]
		return b, true
	}
	for range n {
		if len(p) == 0 {
			return bad("cut short")
		}
		del := p[0]
		p = p[1:]
		key, ok := field()
		if !ok || del > 1 {
			return bad("bad key")
		}
		w := write{key: key}
		if del == 0 {
			if w.val, ok = field(); !ok {
				return bad("bad value")
			}
			if w.val == nil {
				w.val = []byte{}
			}
		}
		ws = append(ws, w)
	}
	if len(p) != 0 {
		return bad("trailing bytes")
	}
	return version, ws, nil
}
