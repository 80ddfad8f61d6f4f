package badgerstore

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

func validSessionID(s string) bool {
	return s != "" && !strings.ContainsRune(s, 0)
}

// FuzzKeys checks that the key encoding is injective and that decodeKey
// inverts it, for any pair of (session, tool use id).
func FuzzKeys(f *testing.F) {
	f.Add("a", "t", "ab", "t")
	f.Add("a", "b/c", "a", "b")
	f.Add("a:1", "x", "a", ":1x")
	f.Fuzz(func(t *testing.T, s1, id1, s2, id2 string) {
		if !validSessionID(s1) || !validSessionID(s2) {
			return
		}
		k1, k2 := ledgerEntryKey(s1, id1), ledgerEntryKey(s2, id2)
		if (s1 != s2 || id1 != id2) == bytes.Equal(k1, k2) {
			t.Fatalf("(%q,%q) and (%q,%q) give keys %x and %x", s1, id1, s2, id2, k1, k2)
		}
		kind, sid, rest, err := decodeKey(k1)
		if err != nil || kind != kindLedgerEntry || sid != s1 || string(rest) != id1 {
			t.Fatalf("decode %x: %d %q %q %v", k1, kind, sid, rest, err)
		}
		// One session's scope never contains another session's keys.
		if s1 != s2 && bytes.HasPrefix(k2, sessionScope(kindLedgerEntry, s1)) {
			t.Fatalf("%q's scope holds %q's key", s1, s2)
		}
		rk := revisionKey(s1, uint64(len(id1)))
		kind, sid, rest, err = decodeKey(rk)
		if err != nil || kind != kindRevision || sid != s1 || binary.BigEndian.Uint64(rest) != uint64(len(id1)) {
			t.Fatalf("decode revision key %x: %v", rk, err)
		}
	})
}

// FuzzDecodeValue checks that no stored bytes make the record decoder panic,
// and that a value only decodes under the key it was written for.
func FuzzDecodeValue(f *testing.F) {
	good, _ := encodeValue(sessionKey("s"), &storagev1.SessionRecord{Revision: 3, Epoch: 2})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var rec storagev1.SessionRecord
		if decodeValue(sessionKey("s"), v, &rec) == nil && decodeValue(sessionKey("t"), v, &rec) == nil && len(v) > 5 {
			t.Fatalf("value %x decodes under two keys", v)
		}
	})
}
