package badgerstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"
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
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(payload))
	out[0] = valueVersion
	binary.BigEndian.PutUint32(out[1:5], checksum(key, payload))
	return append(out, payload...), nil
}

// decodeValue verifies a framed value and unmarshals it into m.
func decodeValue(key, val []byte, m proto.Message) error {
	if len(val) < 5 {
		return fmt.Errorf("value of %d bytes is shorter than its header", len(val))
	}
	if val[0] != valueVersion {
		return fmt.Errorf("unknown value version %d", val[0])
	}
	payload := val[5:]
	if want, got := binary.BigEndian.Uint32(val[1:5]), checksum(key, payload); want != got {
		return fmt.Errorf("checksum mismatch: stored %08x, computed %08x", want, got)
	}
	return proto.Unmarshal(payload, m)
}
