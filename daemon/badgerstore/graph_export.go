package badgerstore

import (
	"context"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// ExportGraph passes every graph thread of the store, live or tombstone, to
// fn in thread id order, all read in one consistent view; it stops at fn's
// first error and returns it. A chunked value's bytes are read from that
// view while fn runs; the thread's other values are in memory. A damaged
// record is core.ErrCheckpointCorrupt; staged uploads, which Open removes, are not
// exported.
func (s *Store) ExportGraph(ctx context.Context, fn func(*core.GraphThreadDump) error) error {
	return s.view(ctx, func(t *tx) error {
		var threads []string
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindGraphThread}})
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			thread, _, rest, ok := splitGraphKey(key, 0)
			if !ok || len(rest) != 0 {
				it.Close()
				return graphCorrupt(thread, fmt.Errorf("malformed thread key %x", key))
			}
			threads = append(threads, thread)
		}
		it.Close()
		for _, thread := range threads {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := exportThread(t, thread)
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

// exportThread reads one thread's records.
func exportThread(t *tx, thread string) (*core.GraphThreadDump, error) {
	h, err := threadHead(t, thread)
	if err != nil {
		return nil, err
	}
	if h == nil || hidden(h) {
		// Open finishes an interrupted delete or copy before anything reads.
		return nil, graphCorrupt(thread, fmt.Errorf("its head is missing or marked as being deleted or copied"))
	}
	d := &core.GraphThreadDump{ThreadID: thread, UpdateTime: timeOf(h.UpdateTime), Deleted: h.Deleted, DeletedThrough: h.DeletedThrough}
	err = graphScan(t, kindGraphCheckpoint, thread, 2, func() proto.Message { return &storagev1.GraphCheckpointRecord{} }, func(key []byte, parts []string, m proto.Message) error {
		r := m.(*storagev1.GraphCheckpointRecord)
		d.Checkpoints = append(d.Checkpoints, core.GraphCheckpointDump{GraphCheckpoint: core.GraphCheckpoint{
			ThreadID: thread, NS: parts[0], ID: parts[1], ParentID: r.ParentCheckpointId, Value: readValue(t, thread, r.Value),
			ChannelVersions: r.ChannelVersions, MetadataJSON: r.MetadataJson,
		}, PutTime: timeOf(r.PutTime)})
		return nil
	})
	if err == nil {
		err = graphScan(t, kindGraphBlob, thread, 3, func() proto.Message { return &storagev1.GraphBlobRecord{} }, func(key []byte, parts []string, m proto.Message) error {
			r := m.(*storagev1.GraphBlobRecord)
			d.Blobs = append(d.Blobs, core.GraphBlobDump{NS: parts[0], GraphBlob: core.GraphBlob{Channel: parts[1], Version: parts[2], Value: readValue(t, thread, r.Value)}})
			return nil
		})
	}
	if err == nil {
		err = graphScan(t, kindGraphWrite, thread, -1, func() proto.Message { return &storagev1.GraphWriteRecord{} }, func(key []byte, _ []string, m proto.Message) error {
			r := m.(*storagev1.GraphWriteRecord)
			_, ns, id, task, idx, ok := decodeGraphWriteKey(key)
			if !ok {
				return graphCorrupt(thread, fmt.Errorf("malformed write key %x", key))
			}
			d.Writes = append(d.Writes, core.GraphWriteDump{NS: ns, CheckpointID: id, GraphWrite: core.GraphWrite{
				TaskID: task, TaskPath: r.TaskPath, Idx: idx, Channel: r.Channel, Value: readValue(t, thread, r.Value)}})
			return nil
		})
	}
	if err == nil {
		err = graphScan(t, kindGraphRequest, thread, 1, func() proto.Message { return &storagev1.GraphRequestRecord{} }, func(key []byte, parts []string, m proto.Message) error {
			r := m.(*storagev1.GraphRequestRecord)
			d.Requests = append(d.Requests, core.GraphRequestDump{RequestID: parts[0], Fingerprint: r.Fingerprint, EffectAttempt: r.EffectAttempt})
			return nil
		})
	}
	if err == nil {
		err = graphScan(t, kindGraphEffect, thread, 2, func() proto.Message { return &storagev1.GraphEffectRecord{} }, func(key []byte, parts []string, m proto.Message) error {
			d.Effects = append(d.Effects, threadEffect(thread, parts[0], parts[1], m.(*storagev1.GraphEffectRecord)))
			return nil
		})
	}
	return d, err
}

// graphScan decodes every record of one kind of a thread, in key order,
// passing each with its key and the key's n parts after the thread (n < 0:
// none, the caller decodes the key).
func graphScan(t *tx, kind byte, thread string, n int, newRec func() proto.Message, fn func(key []byte, parts []string, m proto.Message) error) error {
	it := t.r.NewIterator(badger.IteratorOptions{Prefix: graphKey(kind, thread), PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		var parts []string
		if n >= 0 {
			_, p, rest, ok := splitGraphKey(key, n)
			if !ok || len(p) != n || rest != nil {
				return graphCorrupt(thread, fmt.Errorf("malformed %s key %x", graphKindName(kind), key))
			}
			parts = p
		}
		m := newRec()
		if err := it.Item().Value(func(v []byte) error { return decodeValue(key, v, m) }); err != nil {
			return graphCorrupt(thread, err)
		}
		if err := fn(key, parts, m); err != nil {
			return err
		}
	}
	return nil
}
