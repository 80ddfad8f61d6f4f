package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// Verify checks every record's checksum and decoding, then that each live
// session's latest revision and all of its messages are present, then the
// write-ahead log (its records' CRCs and LSN continuity, internal/wal/verify.go);
// a problem of the log is reported outside any session.
func (s *Store) Verify(ctx context.Context) (core.VerifyReport, error) {
	var c core.VerifyCollector
	note := c.Note
	heads := map[string]*storagev1.SessionRecord{}
	err := s.view(ctx, func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			c.Record()
			key := it.Item().KeyCopy(nil)
			if bytes.Equal(key, seqKey) {
				continue // a bare sequence number, checked at Open
			}
			var rec proto.Message
			kind, sid, _, err := decodeKey(key)
			switch {
			case bytes.Equal(key, formatKey):
				rec = &storagev1.FormatRecord{}
			case bytes.Equal(key, epochFloorKey):
				rec = &storagev1.EpochFloorRecord{}
			case bytes.Equal(key, restoredKey):
				rec = &storagev1.RestoredRecord{}
			case key[0] == kindExpiry:
				if _, sid, err = decodeExpiryKey(key); err != nil {
					note("", fmt.Sprintf("malformed key %x", key))
					continue
				}
				rec = &storagev1.ExpiryRecord{}
			case key[0] == kindUpdated:
				if _, sid, err = decodeUpdatedKey(key); err != nil {
					note("", fmt.Sprintf("malformed key %x", key))
					continue
				}
				rec = &storagev1.UpdateIndexRecord{}
			case isGraphKey(key):
				rec = graphRecord(key)
			case err != nil:
				note("", fmt.Sprintf("malformed key %x", key))
				continue
			case kind == kindSession:
				rec = &storagev1.SessionRecord{}
				c.Session()
			case kind == kindRevision:
				rec = &storagev1.RevisionRecord{}
			case kind == kindMessage:
				rec = &storagev1.Message{}
			case kind == kindLedgerEntry:
				rec = &storagev1.LedgerEntryRecord{}
			case kind == kindRequest:
				rec = &storagev1.RequestRecord{}
			case kind == kindPurge:
				rec = &storagev1.PurgeRecord{}
			}
			val, err := it.Item().ValueCopy(nil)
			if err == nil {
				err = decodeValue(key, val, rec)
			}
			if err != nil {
				note(sid, fmt.Sprintf("%s record %x: %v", kindName(key), key, err))
				continue
			}
			if h, ok := rec.(*storagev1.SessionRecord); ok && !h.Deleted {
				heads[sid] = h
			}
		}
		c.Check(slices.Collect(maps.Keys(heads)), func(sid string) error { return checkHistory(t, sid, heads[sid]) })
		return nil
	})
	if err != nil {
		return core.VerifyReport{}, err
	}
	s.eng.verifyLog(func(problem string) { note("", problem) })
	return c.Report(), nil
}

// checkHistory reports a missing latest revision or message, or a head
// whose history is not its latest revision's.
func checkHistory(t *tx, sid string, h *storagev1.SessionRecord) error {
	rec, err := revision(t, sid, h, 0)
	if err != nil {
		return fmt.Errorf("revision %d: %v", h.Revision, err)
	}
	if !slices.EqualFunc(h.Segments, rec.Segments, func(a, b *storagev1.Segment) bool { return proto.Equal(a, b) }) ||
		h.MessageCount != rec.MessageCount {
		return fmt.Errorf("the head's history (%d messages) is not that of revision %d (%d messages)", h.MessageCount, rec.Revision, rec.MessageCount)
	}
	for _, sg := range rec.Segments {
		for seq := sg.FirstSeq; seq < sg.FirstSeq+sg.Count; seq++ {
			_, found, err := t.get(messageKey(sid, seq))
			if err != nil {
				return fmt.Errorf("message %d of revision %d cannot be read: %v", seq, rec.Revision, err)
			}
			if !found {
				return fmt.Errorf("message %d of revision %d is missing", seq, rec.Revision)
			}
		}
	}
	return nil
}

func kindName(key []byte) string {
	switch key[0] {
	case kindSession:
		return "session"
	case kindRevision:
		return "revision"
	case kindMessage:
		return "message"
	case kindLedgerEntry:
		return "call"
	case kindRequest:
		return "request"
	case kindPurge:
		return "purge"
	case kindExpiry:
		return "expiry"
	case kindUpdated:
		return "update index"
	default:
		if n := graphKindName(key[0]); n != "" {
			return n
		}
		return "format"
	}
}
