package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestGraphBatch folds graph puts into one group commit with a session
// save: a put refused for its reused request id is rolled back to its
// savepoint and the others, on several threads, commit.
func TestGraphBatch(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "graph_batch_internal"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	put := func(thread, id, rid string) *core.GraphPut {
		return &core.GraphPut{RequestID: rid, Checkpoint: core.GraphCheckpoint{ThreadID: thread, ID: id, MetadataJSON: `{}`,
			Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}}}
	}
	const rid = "00000000-0000-4000-8000-000000000001"
	if _, err := s.PutCheckpoint(ctx, put("r", "1", rid)); err != nil {
		t.Fatal(err)
	}
	var ops []*op
	already := make([]bool, 6)
	for i := range 6 {
		p := put(fmt.Sprintf("t%d", i%3), fmt.Sprint(i), "")
		if i == 4 {
			p = put("r", "2", rid) // the id of a different put
		}
		var fp []byte
		if p.RequestID != "" {
			fp = p.Fingerprint().Sum(nil)
		}
		ops = append(ops, &op{sessionID: graphOpPrefix + p.Checkpoint.ThreadID, done: make(chan error, 1),
			fn: s.putOp(p, fp, &already[i]), queues: true})
	}
	ops = append(ops, &op{sessionID: "s", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		_, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "s"}, s.now())
		return err
	}})
	s.commitBatch(ops)
	for i, o := range ops {
		err := <-o.done
		if i == 4 {
			if !errors.Is(err, core.ErrRequestIDReused) {
				t.Errorf("put with a reused request id: %v, want ErrRequestIDReused", err)
			}
		} else if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM "+pgx.Identifier{"graph_batch_internal", "graph_checkpoints"}.Sanitize()).Scan(&n); err != nil || n != 6 {
		t.Fatalf("%d checkpoints stored (%v), want 6: r/1 and the batch's five", n, err)
	}
	if _, err := s.Checkpoint(ctx, "s", 0); err != nil {
		t.Fatalf("the batch's session save: %v", err)
	}
}

// TestGraphBatchRoundTrips: a graph put, put of writes, or begin or
// record of a ledger entry on a thread that exists costs its group commit
// one round trip, whatever its blobs and writes: the thread's lock, its
// request id's row and the entry are read with the statements queued
// before them, and its own writes go with the next request's reads or
// with COMMIT. A batch of six is seven round trips (puts took eight each,
// one statement apiece, before the writes were queued), and each
// request's outcome is its own: a replayed request id, the number of
// writes stored, a record that sees the begin before it.
func TestGraphBatchRoundTrips(t *testing.T) {
	srv := pgtest.Shared(t)
	rt := &batchTrips{}
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "graph_batch_trips", Tracer: rt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	value := core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}
	put := func(thread, id, rid string) *core.GraphPut {
		return &core.GraphPut{RequestID: rid, Checkpoint: core.GraphCheckpoint{ThreadID: thread, ID: id, MetadataJSON: `{}`, Value: value,
			ChannelVersions: map[string]string{"a": id, "b": id}},
			Blobs: []core.GraphBlob{{Channel: "a", Version: id, Value: value}, {Channel: "b", Version: id, Value: value}}}
	}
	writes := func(thread, rid string) *core.GraphWrites {
		return &core.GraphWrites{ThreadID: thread, CheckpointID: "1", TaskID: "task", RequestID: rid,
			Writes: []core.GraphWrite{{Idx: 0, Channel: "a", Value: value}, {Idx: 1, Channel: "b", Value: value}, {Idx: 2, Channel: "c", Value: value}}}
	}
	const replayedID = "00000000-0000-4000-8000-000000000001"
	for _, th := range []string{"t0", "t1"} {
		if _, err := s.PutCheckpoint(ctx, put(th, "1", "")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutWrites(ctx, writes("t1", replayedID)); err != nil {
		t.Fatal(err)
	}

	var already [2]bool
	var res [2]core.GraphWritesResult
	var ops []*op
	for i, th := range []string{"t0", "t1"} {
		p := put(th, "2", fmt.Sprintf("00000000-0000-4000-8000-00000000001%d", i))
		ops = append(ops, &op{sessionID: graphOpPrefix + th, done: make(chan error, 1), queues: true,
			fn: s.putOp(p, p.Fingerprint().Sum(nil), &already[i])})
	}
	for i, w := range []*core.GraphWrites{writes("t0", "00000000-0000-4000-8000-000000000020"), writes("t1", replayedID)} {
		ops = append(ops, &op{sessionID: graphOpPrefix + w.ThreadID, done: make(chan error, 1), queues: true,
			fn: func(ctx context.Context, q *query) error {
				return s.putWrites(ctx, q, w, w.Fingerprint(), func(i int) rowData { return rowData{bytes: w.Writes[i].Value.Data} }, &res[i])
			}})
	}
	// A call of the ledger begun and recorded in the same batch: the
	// record reads what the begin queued.
	var begun core.ThreadEffectBeginResult
	var recorded core.ThreadEffectRecordResult
	ops = append(ops,
		&op{sessionID: graphOpPrefix + "t0", done: make(chan error, 1), queues: true, fn: func(ctx context.Context, q *query) error {
			b := &core.ThreadEffectBegin{ThreadID: "t0", ToolUseID: "call", Name: "pay", InputJSON: `{}`, Class: core.SideEffect,
				RequestID: "00000000-0000-4000-8000-000000000030"}
			var err error
			begun, err = s.beginThreadEffect(ctx, q, b, b.Fingerprint())
			return err
		}},
		&op{sessionID: graphOpPrefix + "t0", done: make(chan error, 1), queues: true, fn: func(ctx context.Context, q *query) error {
			r := &core.ThreadEffectRecord{ThreadID: "t0", ToolUseID: "call", Attempt: 1, Output: value,
				RequestID: "00000000-0000-4000-8000-000000000031"}
			var err error
			recorded, err = applyThreadEffect(ctx, s, q, r.Change())
			return err
		}})
	before, stmts := rt.n.Load(), rt.stmts.Load()
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if got := rt.n.Load() - before; got != int64(len(ops)+1) {
		t.Errorf("%d round trips (%d statements) for a batch of %d graph requests, want %d", got, rt.stmts.Load()-stmts, len(ops), len(ops)+1)
	}
	if already != [2]bool{} {
		t.Errorf("puts with new request ids: already applied %v, want neither", already)
	}
	if want := [2]core.GraphWritesResult{{Written: 3}, {AlreadyApplied: true}}; res != want {
		t.Errorf("put of writes, new and replayed: %+v, want %+v", res, want)
	}
	if begun.Decision != core.DecisionRun || begun.Effect.Attempts != 1 {
		t.Errorf("begin of a new call: %+v, want DecisionRun with attempt 1", begun)
	}
	if recorded.Effect.State != core.ThreadEffectSucceeded || recorded.AlreadyRecorded {
		t.Errorf("record of the call begun earlier in the batch: %+v, want it recorded", recorded)
	}
	tuple := func(thread, id string) *core.GraphTuple {
		var tu *core.GraphTuple
		found, err := s.GetCheckpoint(ctx, thread, "", id, func(x *core.GraphTuple) error { tu = x; return nil })
		if err != nil || !found {
			t.Fatalf("thread %s, checkpoint %s after the batch: found %v, %v", thread, id, found, err)
		}
		return tu
	}
	for _, th := range []string{"t0", "t1"} {
		if tu := tuple(th, "2"); len(tu.Blobs) != 2 {
			t.Errorf("thread %s, checkpoint 2 after the batch: %d blobs, want 2", th, len(tu.Blobs))
		}
	}
	if tu := tuple("t0", "1"); len(tu.Writes) != 3 {
		t.Errorf("thread t0, checkpoint 1 after the batch: %d pending writes, want 3", len(tu.Writes))
	}
}

// TestGraphReadRoundTrips: GetCheckpoint reads a tuple in two round trips,
// the namespace's latest or one by id (six before: BEGIN, the latest id,
// the checkpoint, its blobs, its writes, COMMIT), with its blobs and
// writes, and answers a missing one in two.
func TestGraphReadRoundTrips(t *testing.T) {
	srv := pgtest.Shared(t)
	rt := &batchTrips{}
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "graph_read_trips", Tracer: rt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	value := func(v string) core.GraphValue {
		return core.GraphValue{Type: "json", Data: []byte(v), Size: int64(len(v))}
	}
	for _, id := range []string{"1", "2"} {
		if _, err := s.PutCheckpoint(ctx, &core.GraphPut{Checkpoint: core.GraphCheckpoint{ThreadID: "t", ID: id, MetadataJSON: `{}`,
			Value: value(`"cp` + id + `"`), ChannelVersions: map[string]string{"a": id, "b": "1"}},
			Blobs: []core.GraphBlob{{Channel: "a", Version: id, Value: value(`"a` + id + `"`)}, {Channel: "b", Version: "1", Value: value(`"b"`)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutWrites(ctx, &core.GraphWrites{ThreadID: "t", CheckpointID: id, TaskID: "task",
			Writes: []core.GraphWrite{{Idx: 1, Channel: "a", Value: value(`"w1"`)}, {Idx: 0, Channel: "b", Value: value(`"w0` + id + `"`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ id, want string }{{"", "2"}, {"1", "1"}, {"2", "2"}, {"3", ""}} {
		before := rt.n.Load()
		var tu *core.GraphTuple
		found, err := s.GetCheckpoint(ctx, "t", "", tc.id, func(x *core.GraphTuple) error { tu = x; return nil })
		if got := rt.n.Load() - before; got != 2 {
			t.Errorf("GetCheckpoint(%q): %d round trips, want 2", tc.id, got)
		}
		if err != nil || found != (tc.want != "") {
			t.Fatalf("GetCheckpoint(%q): found %v, %v; want found %v", tc.id, found, err, tc.want != "")
		}
		if !found {
			continue
		}
		c := tu.Checkpoint
		if c.ID != tc.want || string(c.Value.Data) != `"cp`+tc.want+`"` || len(tu.Blobs) != 2 || string(tu.Blobs[0].Value.Data) != `"a`+tc.want+`"` ||
			len(tu.Writes) != 2 || tu.Writes[0].Idx != 0 || string(tu.Writes[0].Value.Data) != `"w0`+tc.want+`"` {
			t.Errorf("GetCheckpoint(%q): %+v, want checkpoint %s with its 2 blobs and 2 writes in order", tc.id, tu, tc.want)
		}
	}
}
