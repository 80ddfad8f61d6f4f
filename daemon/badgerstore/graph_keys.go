package badgerstore

import (
	"bytes"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// Graph key layout (GraphCheckpointService). Every key starts with its kind
// byte and the thread id and a NUL; the strings after it are NUL-separated
// too (validation refuses NUL in all of them), so one thread's keys never
// prefix another's and one namespace's checkpoint ids sort by byte order.
//
//	kindGraphThread     thread 0x00                              -> GraphThreadRecord
//	kindGraphCheckpoint thread 0x00 ns 0x00 id                   -> GraphCheckpointRecord
//	kindGraphBlob       thread 0x00 ns 0x00 channel 0x00 version -> GraphBlobRecord
//	kindGraphWrite      thread 0x00 ns 0x00 id 0x00 task 0x00 idx(4) -> GraphWriteRecord
//	kindGraphRequest    thread 0x00 request_id                   -> GraphRequestRecord
//	kindGraphUpload     thread 0x00 owner(16)                    -> GraphUploadRecord
//	kindGraphChunk      thread 0x00 owner(16) value(4) seq(4)    -> GraphChunkRecord
//	kindGraphEffect     thread 0x00 ns 0x00 tool_use_id          -> GraphEffectRecord
//
// idx is stored as uint32(idx) with its sign bit flipped, big-endian, so
// negative indexes sort first.
const (
	kindGraphThread     byte = 0x20
	kindGraphCheckpoint byte = 0x21
	kindGraphBlob       byte = 0x22
	kindGraphWrite      byte = 0x23
	kindGraphRequest    byte = 0x24
	kindGraphUpload     byte = 0x25
	kindGraphChunk      byte = 0x26
	kindGraphEffect     byte = 0x27
)

// graphDataKinds are the kinds a thread's delete removes, its head aside.
var graphDataKinds = []byte{kindGraphCheckpoint, kindGraphWrite, kindGraphBlob, kindGraphRequest, kindGraphUpload, kindGraphChunk, kindGraphEffect}

func isGraphKey(k []byte) bool {
	return len(k) > 0 && k[0] >= kindGraphThread && k[0] <= kindGraphEffect
}

// graphRecord returns an empty record of the kind key holds.
func graphRecord(key []byte) proto.Message {
	switch key[0] {
	case kindGraphThread:
		return &storagev1.GraphThreadRecord{}
	case kindGraphCheckpoint:
		return &storagev1.GraphCheckpointRecord{}
	case kindGraphBlob:
		return &storagev1.GraphBlobRecord{}
	case kindGraphWrite:
		return &storagev1.GraphWriteRecord{}
	case kindGraphRequest:
		return &storagev1.GraphRequestRecord{}
	case kindGraphUpload:
		return &storagev1.GraphUploadRecord{}
	case kindGraphEffect:
		return &storagev1.GraphEffectRecord{}
	default:
		return &storagev1.GraphChunkRecord{}
	}
}

func graphKindName(kind byte) string {
	switch kind {
	case kindGraphThread:
		return "graph thread"
	case kindGraphCheckpoint:
		return "graph checkpoint"
	case kindGraphBlob:
		return "graph blob"
	case kindGraphWrite:
		return "graph write"
	case kindGraphRequest:
		return "graph request"
	case kindGraphUpload:
		return "graph upload"
	case kindGraphChunk:
		return "graph chunk"
	case kindGraphEffect:
		return "graph effect"
	}
	return ""
}

// graphKey joins kind, thread and parts with NUL separators.
func graphKey(kind byte, thread string, parts ...string) []byte {
	n := 2 + len(thread)
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n+8)
	k = append(k, kind)
	k = append(k, thread...)
	k = append(k, 0)
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return k
}

// graphScope is the prefix of every key of kind under thread and parts.
func graphScope(kind byte, thread string, parts ...string) []byte {
	k := graphKey(kind, thread, parts...)
	if len(parts) > 0 {
		k = append(k, 0)
	}
	return k
}

func graphThreadKey(thread string) []byte { return graphKey(kindGraphThread, thread) }

func graphCheckpointKey(thread, ns, id string) []byte {
	return graphKey(kindGraphCheckpoint, thread, ns, id)
}

func graphBlobKey(thread, ns, channel, version string) []byte {
	return graphKey(kindGraphBlob, thread, ns, channel, version)
}

func graphWriteKey(thread, ns, id, task string, idx int32) []byte {
	k := graphKey(kindGraphWrite, thread, ns, id, task)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(idx)^0x80000000)
}

func graphRequestKey(thread, requestID string) []byte {
	return graphKey(kindGraphRequest, thread, requestID)
}

func graphEffectKey(thread, ns, toolUseID string) []byte {
	return graphKey(kindGraphEffect, thread, ns, toolUseID)
}

func graphUploadKey(thread string, owner []byte) []byte {
	return append(graphKey(kindGraphUpload, thread), owner...)
}

func graphChunkScope(thread string, owner []byte, value uint32) []byte {
	k := append(graphKey(kindGraphChunk, thread), owner...)
	return binary.BigEndian.AppendUint32(k, value)
}

func graphChunkKey(thread string, owner []byte, value, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(graphChunkScope(thread, owner, value), seq)
}

// splitGraphKey returns a graph key's thread and its first n NUL-separated
// parts after it; rest is what follows the n-th part's separator (or the
// last part's end). ok is false for a key with fewer parts.
func splitGraphKey(k []byte, n int) (thread string, parts []string, rest []byte, ok bool) {
	if len(k) < 2 {
		return "", nil, nil, false
	}
	b := k[1:]
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, nil, false
	}
	thread, b = string(b[:i]), b[i+1:]
	for j := 0; j < n; j++ {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			if j == n-1 {
				parts = append(parts, string(b))
				return thread, parts, nil, true
			}
			return "", nil, nil, false
		}
		parts = append(parts, string(b[:i]))
		b = b[i+1:]
	}
	return thread, parts, b, true
}

// decodeGraphWriteKey inverts graphWriteKey.
func decodeGraphWriteKey(k []byte) (thread, ns, id, task string, idx int32, ok bool) {
	thread, parts, rest, ok := splitGraphKey(k, 2)
	if !ok || len(parts) != 2 || rest == nil {
		return "", "", "", "", 0, false
	}
	// rest is task 0x00 idx(4); the task holds no NUL, idx may.
	if len(rest) < 5 || rest[len(rest)-5] != 0 {
		return "", "", "", "", 0, false
	}
	task = string(rest[:len(rest)-5])
	idx = int32(binary.BigEndian.Uint32(rest[len(rest)-4:]) ^ 0x80000000)
	return thread, parts[0], parts[1], task, idx, true
}
