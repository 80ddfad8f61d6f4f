package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// Every stored value is framed as
//
//	version(1) crc32c(4, BE) payload
//
// where the checksum covers the key and the payload, so a value that is
// damaged, or moved under another key, is detected on read.
const valueVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(key, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, key)
	return crc32.Update(c, castagnoli, payload)
}

func encodeValue(key []byte, m proto.Message) ([]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	out := make([]byte, 5, 5+opts.Size(m))
	opts.UseCachedSize = true // just computed
	out, err := opts.MarshalAppend(out, m)
	if err != nil {
		return nil, err
	}
	out[0] = valueVersion
	binary.BigEndian.PutUint32(out[1:5], checksum(key, out[5:]))
	return out, nil
}

// decodeValue verifies a framed value and unmarshals it into m.
func decodeValue(key, val []byte, m proto.Message) error {
	if err := checkFrame(key, val); err != nil {
		return err
	}
	return proto.Unmarshal(val[5:], m)
}

// checkFrame returns nil when val is a value framed for key whose checksum
// holds, and what is wrong with it otherwise.
func checkFrame(key, val []byte) error {
	if len(val) < 5 {
		return fmt.Errorf("value of %d bytes is shorter than its header", len(val))
	}
	if val[0] != valueVersion {
		return fmt.Errorf("unknown value version %d", val[0])
	}
	if want, got := binary.BigEndian.Uint32(val[1:5]), checksum(key, val[5:]); want != got {
		return fmt.Errorf("checksum mismatch: stored %08x, computed %08x", want, got)
	}
	return nil
}

func put(t *tx, key []byte, m proto.Message) error {
	v, err := encodeValue(key, m)
	if err != nil {
		return err
	}
	t.set(key, v)
	return nil
}

// get reads key into m; found is false when the key is absent. A value that
// fails its checksum or does not decode is core.ErrCheckpointCorrupt.
//
// h is the session's head when it is known, so that the error can carry the
// session's revision and epoch (a client needs the epoch to delete it).
func get(t *tx, h *storagev1.SessionRecord, sessionID string, key []byte, m proto.Message) (found bool, err error) {
	var bad error
	found, err = t.read(key, func(v []byte) error {
		bad = decodeValue(key, v, m)
		return nil
	})
	if errors.Is(err, errDamagedTable) {
		return false, corrupt(h, sessionID, err)
	}
	if err != nil || !found {
		return false, err
	}
	if bad != nil {
		return false, corrupt(h, sessionID, bad)
	}
	return true, nil
}

func corrupt(h *storagev1.SessionRecord, sessionID string, err error) error {
	if h == nil {
		return core.Corrupt(nil, sessionID, err)
	}
	return core.Corrupt(&core.HeadRecord{Revision: h.Revision, Epoch: h.Epoch}, sessionID, err)
}
