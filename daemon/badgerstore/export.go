package badgerstore

import (
	"context"
	"maps"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// ExportInfo is what ExportInfo says of a store before an Export.
type ExportInfo struct {
	Sessions     int    // sessions, tombstones included
	GraphThreads int    // GraphCheckpointService threads, tombstones included, which ExportGraph passes
	EpochFloor   uint64 // the highest epoch of the tombstones already removed
	// The graph records of every kind ExportGraph passes, counted by key.
	GraphCheckpoints, GraphBlobs, GraphWrites, GraphRequests, GraphEffects int
}

// ExportInfo counts the store's sessions (tombstones included), graph
// threads and graph records, and reads its epoch floor, in one consistent
// view.
func (s *Store) ExportInfo(ctx context.Context) (ExportInfo, error) {
	var info ExportInfo
	err := s.view(ctx, func(t *tx) error {
		var floor storagev1.EpochFloorRecord
		if _, err := get(t, nil, "", epochFloorKey, &floor); err != nil {
			return err
		}
		info.EpochFloor = floor.Epoch
		info.GraphThreads = countKind(t, kindGraphThread)
		info.GraphCheckpoints = countKind(t, kindGraphCheckpoint)
		info.GraphBlobs = countKind(t, kindGraphBlob)
		info.GraphWrites = countKind(t, kindGraphWrite)
		info.GraphRequests = countKind(t, kindGraphRequest)
		info.GraphEffects = countKind(t, kindGraphEffect)
		info.Sessions = countKind(t, kindSession)
		return nil
	})
	return info, err
}

func countKind(t *tx, kind byte) int {
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// Export passes every session of the store, live or tombstone, to fn in
// session id order, all read in one consistent view; it stops at fn's first
// error and returns it. A damaged record is core.ErrCheckpointCorrupt. Graph
// threads are ExportGraph's.
func (s *Store) Export(ctx context.Context, fn func(*core.SessionDump) error) error {
	return s.view(ctx, func(t *tx) error {
		var ids []string
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}})
		for it.Rewind(); it.Valid(); it.Next() {
			_, sid, _, err := decodeKey(it.Item().KeyCopy(nil))
			if err != nil {
				it.Close()
				return corrupt(nil, "", err)
			}
			ids = append(ids, sid)
		}
		it.Close()
		for _, sid := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := exportSession(t, sid)
			if err != nil {
				return err
			}
			if err := fn(d); err != nil {
				return err
			}
		}
		return nil
	})
}

// exportSession reads one session's records.
func exportSession(t *tx, sid string) (*core.SessionDump, error) {
	var h storagev1.SessionRecord
	if _, err := get(t, nil, sid, sessionKey(sid), &h); err != nil {
		return nil, err
	}
	d := &core.SessionDump{SessionID: sid, Deleted: h.Deleted, HeadRecord: headFromRecord(&h)}
	d.Labels = maps.Clone(h.Labels)
	if h.Deleted {
		return d, nil
	}
	err := scan(t, sid, kindRevision, func() proto.Message { return &storagev1.RevisionRecord{} }, func(_ []byte, m proto.Message) {
		r := m.(*storagev1.RevisionRecord)
		rd := revisionFromRecord(r)
		rd.Labels = maps.Clone(r.Labels)
		d.Revisions = append(d.Revisions, rd)
	}, &h)
	if err == nil {
		err = scan(t, sid, kindMessage, func() proto.Message { return &storagev1.Message{} }, func(rest []byte, m proto.Message) {
			r := m.(*storagev1.Message)
			d.Messages = append(d.Messages, core.SeqMessage{Seq: be64(rest), Message: core.Message{Role: r.Role, ContentJSON: r.ContentJson}})
		}, &h)
	}
	if err == nil {
		err = scan(t, sid, kindLedgerEntry, func() proto.Message { return &storagev1.LedgerEntryRecord{} }, func(rest []byte, m proto.Message) {
			r := m.(*storagev1.LedgerEntryRecord)
			d.Ledger = append(d.Ledger, ledgerEntry(string(rest), r))
		}, &h)
	}
	if err == nil {
		err = scan(t, sid, kindRequest, func() proto.Message { return &storagev1.RequestRecord{} }, func(rest []byte, m proto.Message) {
			r := m.(*storagev1.RequestRecord)
			d.Requests = append(d.Requests, core.RequestRecord{
				RequestID: string(rest), Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch,
				AlreadyBegun: r.AlreadyBegun,
			})
		}, &h)
	}
	return d, err
}

// scan decodes every record of one kind of a session, in key order, passing
// each with the key's part after the session id.
func scan(t *tx, sid string, kind byte, newRec func() proto.Message, fn func(rest []byte, m proto.Message), h *storagev1.SessionRecord) error {
	prefix := sessionScope(kind, sid)
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		m := newRec()
		if err := it.Item().Value(func(v []byte) error { return decodeValue(key, v, m) }); err != nil {
			return corrupt(h, sid, err)
		}
		fn(key[len(prefix):], m)
	}
	return nil
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
