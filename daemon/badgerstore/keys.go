package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Key layout. Every key starts with a kind byte. Session-scoped keys follow it
// with the session id and a NUL byte (session ids never contain NUL), so one
// session's keys never prefix another's and sessions sort by id.
//
//	kindFormat                              -> format version
//	kindSession  sid 0x00                   -> SessionRecord (head or tombstone)
//	kindRevision sid 0x00 revision(8, BE)   -> RevisionRecord
//	kindMessage  sid 0x00 seq(8, BE)        -> Message
//	kindLedgerEntry     sid 0x00 tool_use_id       -> LedgerEntryRecord
//	kindRequest  sid 0x00 request_id        -> RequestRecord
//	kindPurge    sid 0x00                   -> PurgeRecord (a delete to finish)
//	kindExpiry   expiry(8, BE) sid          -> ExpiryRecord (a tombstone to remove)
//	kindUpdated  ^update(8, BE) sid         -> UpdateIndexRecord (a live head by last update)
//
// kindFormat also holds the commit sequence number (engine.go) and the
// epoch floor of removed tombstones.
const (
	kindFormat      byte = 0x00
	kindSession     byte = 0x01
	kindRevision    byte = 0x02
	kindMessage     byte = 0x03
	kindLedgerEntry byte = 0x04
	kindRequest     byte = 0x05
	kindPurge       byte = 0x06
	kindExpiry      byte = 0x07
	kindUpdated     byte = 0x08
)

var (
	formatKey     = []byte{kindFormat, 'f', 'o', 'r', 'm', 'a', 't'}
	epochFloorKey = []byte{kindFormat, 'e', 'p', 'o', 'c', 'h'}
	restoredKey   = []byte{kindFormat, 'r', 'e', 's', 't', 'o', 'r', 'e', 'd'}
)

// sessionScope is the prefix of every key of one kind for one session.
func sessionScope(kind byte, sessionID string) []byte {
	k := make([]byte, 0, len(sessionID)+2+8)
	k = append(k, kind)
	k = append(k, sessionID...)
	return append(k, 0)
}

func sessionKey(sessionID string) []byte { return sessionScope(kindSession, sessionID) }

func revisionKey(sessionID string, rev uint64) []byte {
	return binary.BigEndian.AppendUint64(sessionScope(kindRevision, sessionID), rev)
}

func messageKey(sessionID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(sessionScope(kindMessage, sessionID), seq)
}

func ledgerEntryKey(sessionID, toolUseID string) []byte {
	return append(sessionScope(kindLedgerEntry, sessionID), toolUseID...)
}

func requestKey(sessionID, requestID string) []byte {
	return append(sessionScope(kindRequest, sessionID), requestID...)
}

func purgeKey(sessionID string) []byte { return sessionScope(kindPurge, sessionID) }

// expiryKey orders tombstones by the time they expire, in Unix nanoseconds.
func expiryKey(at time.Time, sessionID string) []byte {
	k := make([]byte, 0, 9+len(sessionID))
	k = append(k, kindExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(max(at.UnixNano(), 0)))
	return append(k, sessionID...)
}

// decodeExpiryKey inverts expiryKey.
func decodeExpiryKey(k []byte) (at time.Time, sessionID string, err error) {
	if len(k) < 10 || k[0] != kindExpiry {
		return time.Time{}, "", errBadKey
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))), string(k[9:]), nil
}

// updatedKey orders live heads by update time, newest first (the time in
// Unix nanoseconds subtracted from 2^64-1), then by session id.
func updatedKey(at time.Time, sessionID string) []byte {
	k := make([]byte, 0, 9+len(sessionID))
	k = append(k, kindUpdated)
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(unixNanos(at)))
	return append(k, sessionID...)
}

// unixNanos is t in Unix nanoseconds, 0 for a zero or earlier time.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 0)
}

// decodeUpdatedKey inverts updatedKey.
func decodeUpdatedKey(k []byte) (at time.Time, sessionID string, err error) {
	if len(k) < 10 || k[0] != kindUpdated {
		return time.Time{}, "", errBadKey
	}
	return time.Unix(0, int64(math.MaxUint64-binary.BigEndian.Uint64(k[1:9]))), string(k[9:]), nil
}

var errBadKey = errors.New("badgerstore: malformed key")

// decodeKey splits a session-scoped key into its kind, session id and the
// rest (revision, sequence number or tool use id). It inverts the encoders.
func decodeKey(k []byte) (kind byte, sessionID string, rest []byte, err error) {
	if len(k) < 2 || k[0] < kindSession || k[0] > kindPurge {
		return 0, "", nil, errBadKey
	}
	i := bytes.IndexByte(k[1:], 0)
	if i < 1 {
		return 0, "", nil, errBadKey
	}
	kind, sessionID, rest = k[0], string(k[1:1+i]), k[2+i:]
	switch kind {
	case kindSession, kindPurge:
		if len(rest) != 0 {
			return 0, "", nil, errBadKey
		}
	case kindRevision, kindMessage:
		if len(rest) != 8 {
			return 0, "", nil, errBadKey
		}
	}
	return kind, sessionID, rest, nil
}
