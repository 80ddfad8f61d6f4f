package badgerstore

import (
	"encoding/binary"
	"fmt"
)

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
