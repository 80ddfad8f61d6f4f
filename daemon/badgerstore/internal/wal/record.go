package wal

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
