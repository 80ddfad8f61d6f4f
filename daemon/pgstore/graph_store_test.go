package pgstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

func graphPut(thread, id string) *core.GraphPut {
	return &core.GraphPut{
		Checkpoint: core.GraphCheckpoint{ThreadID: thread, ID: id, MetadataJSON: `{}`,
			Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}, ChannelVersions: map[string]string{"a": id}},
		Blobs: []core.GraphBlob{{Channel: "a", Version: id, Value: core.GraphValue{Type: "json", Data: []byte(`"` + id + `"`), Size: 3}}},
	}
}

func graphWrites(thread, id string) *core.GraphWrites {
	return &core.GraphWrites{ThreadID: thread, CheckpointID: id, TaskID: "task",
		Writes: []core.GraphWrite{{TaskID: "task", Idx: 0, Channel: "c", Value: core.GraphValue{Type: "json", Data: []byte(`1`), Size: 1}}}}
}

func latest(t *testing.T, s *pgstore.Store, thread string) (*core.GraphTuple, error) {
	t.Helper()
	var got *core.GraphTuple
	_, err := s.GetCheckpoint(ctx, thread, "", "", func(tp *core.GraphTuple) error { got = tp; return nil })
	return got, err
}

// TestGraphTwoStores: two stores on one schema (two hosts) see each other's
// checkpoints, the late-write rule holds across them, and concurrent
// writes to one thread from both lose nothing.
func TestGraphTwoStores(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	a, b := open(t, srv.URL("postgres"), schema), open(t, srv.URL("postgres"), schema)
	if _, err := a.PutCheckpoint(ctx, graphPut("t", "1")); err != nil {
		t.Fatal(err)
	}
	if tp, err := latest(t, b, "t"); err != nil || tp == nil || len(tp.Blobs) != 1 {
		t.Fatalf("B reads A's checkpoint: %v %v", tp, err)
	}
	if err := a.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	res, err := b.PutWrites(ctx, graphWrites("t", "1"))
	if err != nil || !res.DroppedLate || res.Written != 0 {
		t.Fatalf("late write on B after A's delete: %+v %v", res, err)
	}
	if tp, err := latest(t, a, "t"); err != nil || tp != nil {
		t.Fatalf("the late write brought the thread back: %v %v", tp, err)
	}
	// A write for a newer checkpoint id is a new run: kept.
	if res, err := b.PutWrites(ctx, graphWrites("t", "2")); err != nil || res.DroppedLate || res.Written != 1 {
		t.Fatalf("write for a new checkpoint: %+v %v", res, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			w := graphWrites("c", "1")
			w.TaskID = string(rune('a' + i%26))
			w.Writes[0].Idx = int32(i)
			_, err := s.PutWrites(ctx, w)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.PutCheckpoint(ctx, graphPut("c", "1")); err != nil {
		t.Fatal(err)
	}
	if tp, err := latest(t, b, "c"); err != nil || tp == nil || len(tp.Writes) != 40 {
		t.Fatalf("after 40 concurrent writes on two stores: %v %v", tp, err)
	}
}

// TestGraphCorruptRow: a graph row edited outside savepointd is
// CHECKPOINT_CORRUPT on read and reported by Verify.
func TestGraphCorruptRow(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	if _, err := s.PutCheckpoint(ctx, graphPut("t", "1")); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 || rep.CheckedRecords != 3 {
		t.Fatalf("Verify before the edit: %+v %v", rep, err)
	}
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "graph_blobs"}.Sanitize()+" SET data = '\\x2258220a'::bytea")
	if _, err := latest(t, s, "t"); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("read of the edited blob: %v, want ErrCheckpointCorrupt", err)
	}
	rep, err = s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0].Problem, "graph_blobs") {
		t.Fatalf("Verify after the edit: %+v %v", rep, err)
	}
}

// TestGraphDeleteIdle: DeleteIdleThreads deletes threads not written since
// the cutoff, keeping their tombstones for the late-write rule, and then
// forgets tombstones older than the cutoff.
func TestGraphDeleteIdle(t *testing.T) {
	srv := pgtest.Shared(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := open(t, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	if _, err := s.PutCheckpoint(ctx, graphPut("old", "1")); err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if _, err := s.PutCheckpoint(ctx, graphPut("new", "1")); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteIdleThreads(ctx, now.Add(-30*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteIdleThreads: %d %v, want 1", n, err)
	}
	if tp, _ := latest(t, s, "old"); tp != nil {
		t.Fatal("the idle thread is still there")
	}
	if tp, _ := latest(t, s, "new"); tp == nil {
		t.Fatal("the written thread was deleted")
	}
	if res, err := s.PutWrites(ctx, graphWrites("old", "1")); err != nil || !res.DroppedLate {
		t.Fatalf("late write after the idle delete: %+v %v", res, err)
	}
	rep, _ := s.Verify(ctx)
	before := rep.CheckedRecords
	advance(2 * time.Hour)
	if _, err := s.PutCheckpoint(ctx, graphPut("new", "2")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteIdleThreads(ctx, now.Add(-30*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second sweep: %d %v, want 0 (only a tombstone to forget)", n, err)
	}
	rep, _ = s.Verify(ctx)
	if rep.CheckedRecords != before+2-1 { // new@2 and its blob; the tombstone gone
		t.Fatalf("%d records after the second sweep, want %d", rep.CheckedRecords, before+1)
	}
}

// TestGraphStaleUpload: an upload left staged (its daemon died) is removed
// with its chunks when a store opens on the schema a day later; one
// younger than that is left to its daemon.
func TestGraphStaleUpload(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func(o *pgstore.Options) { o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now } }
	s := open(t, srv.URL("postgres"), schema, clock)
	p := graphPut("t", "1")
	p.Blobs[0].Value.Data, p.Checkpoint.Value.Data = nil, nil
	begin := func() core.GraphUpload {
		u, err := s.BeginUpload(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Write(ctx, []byte(`{}"1"`)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	old := begin()
	mu.Lock()
	now = now.Add(25 * time.Hour)
	mu.Unlock()
	young := begin()
	open(t, srv.URL("postgres"), schema, clock)
	if _, err := old.Commit(ctx); !errors.Is(err, core.ErrUploadAborted) {
		t.Fatalf("commit of the stale upload: %v, want ErrUploadAborted", err)
	}
	if _, err := young.Commit(ctx); err != nil {
		t.Fatalf("commit of the young upload: %v", err)
	}
	c, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT (SELECT COUNT(*) FROM "+pgx.Identifier{schema, "graph_uploads"}.Sanitize()+
		") + (SELECT COUNT(*) FROM "+pgx.Identifier{schema, "graph_upload_chunks"}.Sanitize()+")").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d staged rows left (%v), want 0", n, err)
	}
	if tp, err := latest(t, s, "t"); err != nil || tp == nil || string(tp.Blobs[0].Value.Data) != `"1"` {
		t.Fatalf("the young upload's checkpoint: %v %v", tp, err)
	}
}
