package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	"github.com/savepoint-dev/savepoint/daemon/migrate"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func gval(typ, data string) core.GraphValue {
	return core.GraphValue{Type: typ, Data: []byte(data), Size: int64(len(data))}
}

// randomBytes are n deterministic bytes of seed.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
	return b
}

// graphRequestID is the i-th graph request id of fillGraph.
func graphRequestID(i int) string { return fmt.Sprintf("00000000-0000-4000-9000-%012d", i) }

// fillGraph writes, through core.GraphStore, the graph threads the
// migration tests copy: "main" with two namespaces, parent chains, blobs,
// request ids and pending writes (special indexes among them), one run's
// checkpoints deleted, and a ledger (a call in doubt, one recorded, one
// failed at its second attempt, a 100 KiB output, begins and a record
// with request ids); "big" uploaded in chunks (values of several MiB, an
// empty one) with a 100 KiB pending write and a ledger entry; "copy", a
// CopyThread of "big"; "gone", deleted (a tombstone, its ledger gone);
// "pruned", its ledger kept; and "orphan", writes to a checkpoint never
// stored.
func fillGraph(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	put := func(thread, ns, id, parent, md string, versions map[string]string, blobs []core.GraphBlob, req string) {
		t.Helper()
		_, err := s.PutCheckpoint(ctx, &core.GraphPut{Checkpoint: core.GraphCheckpoint{
			ThreadID: thread, NS: ns, ID: id, ParentID: parent, Value: gval("json", `{"id":"`+id+`"}`),
			ChannelVersions: versions, MetadataJSON: md}, Blobs: blobs, RequestID: req})
		must(err)
	}
	writes := func(thread, ns, id, task, path, req string, ws ...core.GraphWrite) {
		t.Helper()
		for i := range ws {
			ws[i].TaskID, ws[i].TaskPath = task, path
		}
		_, err := s.PutWrites(ctx, &core.GraphWrites{ThreadID: thread, NS: ns, CheckpointID: id, TaskID: task, TaskPath: path, Writes: ws, RequestID: req})
		must(err)
	}
	parent := ""
	for i := 1; i <= 12; i++ {
		id := fmt.Sprintf("%02d", i)
		run := "run-a"
		if i == 5 || i == 9 {
			run = "run-b"
		}
		versions := map[string]string{"messages": fmt.Sprint(i), "count": fmt.Sprint((i + 1) / 2)}
		blobs := []core.GraphBlob{{Channel: "messages", Version: fmt.Sprint(i), Value: gval("msgpack", strings.Repeat("m", i*100))}}
		if i%2 == 1 {
			blobs = append(blobs, core.GraphBlob{Channel: "count", Version: fmt.Sprint((i + 1) / 2), Value: gval("json", fmt.Sprint(i))})
		}
		req := ""
		if i%3 == 0 {
			req = graphRequestID(i)
		}
		put("main", "", id, parent, fmt.Sprintf(`{"run_id":%q,"step":%d,"source":"loop"}`, run, i), versions, blobs, req)
		parent = id
		if i <= 2 {
			put("main", "child:x", id+"a", "", `{"source":"sub"}`, map[string]string{"sub": "1"},
				[]core.GraphBlob{{Channel: "sub", Version: "1", Value: gval("json", `"sub"`)}}, "")
		}
	}
	writes("main", "", "12", "task-1", "~__pregel_pull, node", graphRequestID(100),
		core.GraphWrite{Idx: 0, Channel: "messages", Value: gval("json", `"w0"`)},
		core.GraphWrite{Idx: 1, Channel: "count", Value: gval("json", `7`)})
	writes("main", "", "12", "task-2", "node2", "", core.GraphWrite{Idx: core.GraphIdxError, Channel: "__error__", Value: gval("json", `"boom"`)})
	writes("main", "", "11", "task-0", "", "", core.GraphWrite{Idx: core.GraphIdxInterrupt, Channel: "__interrupt__", Value: gval("json", `{}`)})
	writes("main", "child:x", "01a", "task-c", "sub", "", core.GraphWrite{Idx: 0, Channel: "sub", Value: gval("json", `"c"`)})
	if n, err := s.DeleteForRuns(ctx, []string{"run-b"}); err != nil || n != 2 {
		t.Fatalf("DeleteForRuns: %d %v", n, err)
	}
	effect := func(thread, ns, id, name string, class core.EffectClass, checkpoint, req string) core.ThreadEffectBeginResult {
		t.Helper()
		res, err := s.BeginThreadEffect(ctx, &core.ThreadEffectBegin{ThreadID: thread, NS: ns, ToolUseID: id, Name: name,
			InputJSON: `{"call":"` + id + `"}`, Class: class, CheckpointID: checkpoint, RequestID: req})
		must(err)
		return res
	}
	record := func(thread, ns, id string, attempt uint32, out string, isError bool, req string) {
		t.Helper()
		_, err := s.RecordThreadEffect(ctx, &core.ThreadEffectRecord{ThreadID: thread, NS: ns, ToolUseID: id, Attempt: attempt,
			Output: gval("json", out), IsError: isError, RequestID: req})
		must(err)
	}
	effect("main", "", "pay", "pay", core.SideEffect, "12", graphRequestID(500))
	effect("main", "", "send", "send_email", core.SideEffect, "12", "")
	record("main", "", "send", 1, `"sent"`, false, graphRequestID(501))
	effect("main", "child:x", "fetch", "fetch", core.Idempotent, "02a", graphRequestID(502))
	if res := effect("main", "child:x", "fetch", "fetch", core.Idempotent, "02a", graphRequestID(503)); res.Effect.Attempts != 2 {
		t.Fatalf("a second attempt: %+v", res)
	}
	record("main", "child:x", "fetch", 2, `"timeout"`, true, "")
	effect("main", "", "read", "read", core.ReadOnly, "", "")
	record("main", "", "read", 1, `"`+strings.Repeat("r", 100<<10)+`"`, false, "")

	// "big": 2.5 MiB checkpoint value, a 3 MiB blob and an empty one, in
	// 700 KiB upload pieces.
	cpData, blobData := randomBytes(1, 5<<19), randomBytes(2, 3<<20)
	u, err := s.BeginUpload(ctx, &core.GraphPut{RequestID: graphRequestID(200), Checkpoint: core.GraphCheckpoint{
		ThreadID: "big", ID: "1", MetadataJSON: `{"source":"upload"}`, Value: core.GraphValue{Type: "pickle", Size: int64(len(cpData))},
		ChannelVersions: map[string]string{"doc": "1", "empty": "1"}},
		Blobs: []core.GraphBlob{{Channel: "doc", Version: "1", Value: core.GraphValue{Type: "bytes", Size: int64(len(blobData))}},
			{Channel: "empty", Version: "1", Value: core.GraphValue{Type: "empty"}}}})
	must(err)
	all := append(append([]byte(nil), cpData...), blobData...)
	for len(all) > 0 {
		n := min(len(all), 700<<10)
		must(u.Write(ctx, all[:n]))
		all = all[n:]
	}
	_, err = u.Commit(ctx)
	must(err)
	writes("big", "", "1", "task-big", "big", "", core.GraphWrite{Idx: 0, Channel: "doc", Value: core.GraphValue{Type: "bytes", Data: randomBytes(3, 100<<10), Size: 100 << 10}})
	effect("big", "", "upload", "upload", core.SideEffect, "1", "")
	record("big", "", "upload", 1, `"uploaded"`, false, "")
	_, err = s.CopyThread(ctx, "big", "copy")
	must(err)

	put("gone", "", "01", "", `{}`, nil, nil, graphRequestID(300))
	put("gone", "", "02", "01", `{}`, nil, nil, "")
	writes("gone", "", "02", "t", "", "", core.GraphWrite{Idx: 0, Channel: "c", Value: gval("json", `1`)})
	effect("gone", "", "doomed", "pay", core.SideEffect, "02", "")
	must(s.DeleteThread(ctx, "gone"))

	for i := 1; i <= 3; i++ {
		put("pruned", "", fmt.Sprint(i), "", `{}`, map[string]string{"c": fmt.Sprint(i)},
			[]core.GraphBlob{{Channel: "c", Version: fmt.Sprint(i), Value: gval("json", fmt.Sprint(i))}}, "")
	}
	effect("pruned", "", "kept", "pay", core.SideEffect, "1", "")
	if _, err := s.Prune(ctx, []string{"pruned"}, core.PruneKeepLatest); err != nil {
		t.Fatal(err)
	}
	writes("orphan", "", "never", "t", "", graphRequestID(400), core.GraphWrite{Idx: 0, Channel: "c", Value: gval("json", `1`)})
}

// flatTuple is a tuple with every value read whole, comparable with
// reflect.DeepEqual.
type flatTuple struct {
	Checkpoint core.GraphCheckpoint
	Blobs      []core.GraphBlob
	Writes     []core.GraphWrite
}

func flatValue(t *testing.T, v core.GraphValue) core.GraphValue {
	t.Helper()
	var b []byte
	if err := v.Each(func(p []byte) error { b = append(b, p...); return nil }); err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != v.Size {
		t.Fatalf("a value of %d bytes has %d", v.Size, len(b))
	}
	return core.GraphValue{Type: v.Type, Size: v.Size, Data: b}
}

func flatten(t *testing.T, tp *core.GraphTuple) flatTuple {
	t.Helper()
	f := flatTuple{Checkpoint: tp.Checkpoint}
	f.Checkpoint.Value = flatValue(t, tp.Checkpoint.Value)
	if len(f.Checkpoint.ChannelVersions) == 0 {
		f.Checkpoint.ChannelVersions = nil
	}
	for _, b := range tp.Blobs {
		b.Value = flatValue(t, b.Value)
		f.Blobs = append(f.Blobs, b)
	}
	for _, w := range tp.Writes {
		w.Value = flatValue(t, w.Value)
		f.Writes = append(f.Writes, w)
	}
	return f
}

func listFlat(t *testing.T, s core.GraphStore, q core.GraphListQuery) []flatTuple {
	t.Helper()
	var out []flatTuple
	if err := s.ListCheckpoints(context.Background(), q, func(tp *core.GraphTuple) error {
		out = append(out, flatten(t, tp))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func getFlat(t *testing.T, s core.GraphStore, thread, ns, id string) *flatTuple {
	t.Helper()
	var out *flatTuple
	found, err := s.GetCheckpoint(context.Background(), thread, ns, id, func(tp *core.GraphTuple) error {
		f := flatten(t, tp)
		out = &f
		return nil
	})
	if err != nil || found != (out != nil) {
		t.Fatalf("GetCheckpoint(%q, %q, %q): %v %v", thread, ns, id, found, err)
	}
	return out
}

// TestMigrateStoreGraph copies a store with sessions and graph threads into
// PostgreSQL, then compares every graph read of the two stores through
// core.GraphStore, and serves both with savepointd: reads, retries,
// reused request ids and late writes get the same answers.
func TestMigrateStoreGraph(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dir := t.TempDir()
	fillStore(t, dir)
	fillGraph(t, dir)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db)}, envOf(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("migrate-store: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	t.Logf("%s%s", stdout.String(), stderr.String())
	for _, want := range []string{"4 sessions (3 live, 1 tombstone)", "copied 6 graph threads (1 tombstone), 15 checkpoints, ", ", 7 graph effects, ",
		"every graph thread compared equal", "0 damaged"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "copied 6/6 graph threads") || !strings.Contains(stderr.String(), "compared 6/6 graph threads") {
		t.Errorf("no graph progress lines:\n%s", stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	src, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	ns := func(s string) *string { return &s }
	queries := []core.GraphListQuery{
		{}, {ThreadID: "main"}, {ThreadID: "main", NS: ns("")}, {ThreadID: "main", NS: ns("child:x")}, {NS: ns("")},
		{ThreadID: "main", Before: "07"}, {Filter: map[string]any{"source": "loop"}}, {Filter: map[string]any{"step": 3.0}},
		{Limit: 3}, {ThreadID: "main", Limit: 2, Before: "10"}, {ThreadID: "big"}, {ThreadID: "copy"}, {ThreadID: "gone"},
		{ThreadID: "pruned"}, {ThreadID: "orphan"}, {ThreadID: "none"},
	}
	var listed int
	for _, q := range queries {
		want, got := listFlat(t, src, q), listFlat(t, dst, q)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("ListCheckpoints(%+v): badger %d tuples, postgres %d, not equal", q, len(want), len(got))
		}
		if q.ThreadID == "" && q.NS == nil && q.Filter == nil && q.Limit == 0 {
			listed = len(want)
			for _, tp := range want {
				c := tp.Checkpoint
				if w, g := getFlat(t, src, c.ThreadID, c.NS, c.ID), getFlat(t, dst, c.ThreadID, c.NS, c.ID); !reflect.DeepEqual(w, g) {
					t.Errorf("GetCheckpoint(%q, %q, %q) differs", c.ThreadID, c.NS, c.ID)
				}
			}
		}
	}
	if listed != 15 {
		t.Errorf("%d checkpoints listed, want 15", listed)
	}
	for _, tn := range [][2]string{{"main", ""}, {"main", "child:x"}, {"big", ""}, {"copy", ""}, {"gone", ""}, {"pruned", ""}, {"orphan", ""}, {"none", ""}} {
		w, g := getFlat(t, src, tn[0], tn[1], ""), getFlat(t, dst, tn[0], tn[1], "")
		if !reflect.DeepEqual(w, g) {
			t.Errorf("the latest of %q %q differs", tn[0], tn[1])
		}
		if tn[0] == "big" && (w == nil || w.Checkpoint.Value.Size != 5<<19 || len(w.Blobs) != 2 || w.Blobs[0].Value.Size != 3<<20 || len(w.Writes) != 1) {
			t.Errorf("the uploaded checkpoint is not as written: %+v", w)
		}
	}
	// The ledgers, through core.GraphStore, entry by entry.
	for _, tc := range []struct {
		thread string
		n      int
	}{{"main", 4}, {"big", 1}, {"copy", 1}, {"gone", 0}, {"pruned", 1}, {"orphan", 0}, {"none", 0}} {
		want, err := src.ListThreadEffects(ctx, tc.thread, core.ThreadEffectKey{}, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.ListThreadEffects(ctx, tc.thread, core.ThreadEffectKey{}, 100, 0)
		if err != nil || len(want) != tc.n || !reflect.DeepEqual(want, got) {
			t.Errorf("ListThreadEffects(%q): badger %d entries, postgres %d (%v), want %d and equal:\n%+v\n%+v", tc.thread, len(want), len(got), err, tc.n, want, got)
		}
	}
	dst.Close()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	bin := daemontest.Binary(t)
	onBadger := daemontest.StartBinary(t, bin, "--data-dir", dir)
	onPG := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	gb, gp := savepointv1.NewGraphCheckpointServiceClient(onBadger.Conn), savepointv1.NewGraphCheckpointServiceClient(onPG.Conn)
	same := func(what string, call func(c savepointv1.GraphCheckpointServiceClient) (any, error)) {
		t.Helper()
		want, werr := call(gb)
		got, gerr := call(gp)
		if testing.Verbose() {
			t.Logf("%s: %.300v %v", what, fmt.Sprint(got), gerr)
		}
		eq := fmt.Sprint(werr) == fmt.Sprint(gerr)
		switch w := want.(type) {
		case proto.Message:
			eq = eq && proto.Equal(w, got.(proto.Message))
		case []*graphtest.Tuple:
			eq = eq && sameTuples(w, got.([]*graphtest.Tuple))
		default:
			t.Fatalf("%s: cannot compare a %T", what, want)
		}
		if !eq {
			t.Errorf("%s differs:\n badger: %v %v\n postgres: %v %v", what, want, werr, got, gerr)
		}
	}
	tuple := func(thread, ns, id string) func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
			tp, err := graphtest.Get(ctx, c, &savepointv1.GetCheckpointRequest{ThreadId: thread, CheckpointNs: ns, CheckpointId: id}, 0)
			if tp == nil {
				return []*graphtest.Tuple(nil), err
			}
			return []*graphtest.Tuple{tp}, err
		}
	}
	same("GetCheckpoint big", tuple("big", "", ""))
	same("GetCheckpoint copy", tuple("copy", "", "1"))
	same("GetCheckpoint main child:x", tuple("main", "child:x", ""))
	same("ListCheckpoints all", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return graphtest.List(ctx, c, &savepointv1.ListCheckpointsRequest{}, 0)
	})
	same("retried put", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{RequestId: graphRequestID(6), Checkpoint: &savepointv1.GraphCheckpoint{
			ThreadId: "main", CheckpointId: "06", ParentCheckpointId: "05", Checkpoint: &savepointv1.TypedValue{Type: "json", Data: []byte(`{"id":"06"}`)},
			ChannelVersions: map[string]string{"messages": "6", "count": "3"}, MetadataJson: `{"run_id":"run-a","step":6,"source":"loop"}`},
			Blobs: []*savepointv1.ChannelBlob{{Channel: "messages", Version: "6", Value: &savepointv1.TypedValue{Type: "msgpack", Data: []byte(strings.Repeat("m", 600))}}}})
	})
	same("reused request id", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{RequestId: graphRequestID(6), Checkpoint: &savepointv1.GraphCheckpoint{
			ThreadId: "main", CheckpointId: "06", MetadataJson: `{}`}})
	})
	same("retried writes", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "orphan", CheckpointId: "never", TaskId: "t", RequestId: graphRequestID(400),
			Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`)}}}})
	})
	same("late write to the deleted thread", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "gone", CheckpointId: "02", TaskId: "late",
			Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`2`)}}}})
	})
	same("write above the tombstone", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "gone", CheckpointId: "03", TaskId: "new",
			Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`3`)}}}})
	})
	begin := func(ns, id, name string, class savepointv1.EffectClass, checkpoint, req string) func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
			return c.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "main", CheckpointNs: ns, ToolUseId: id, Name: name,
				InputJson: `{"call":"` + id + `"}`, EffectClass: class, CheckpointId: checkpoint, RequestId: req})
		}
	}
	same("retried begin of a first attempt", begin("child:x", "fetch", "fetch", savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT, "02a", graphRequestID(502)))
	same("retried begin of the call in doubt", begin("", "pay", "pay", savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, "12", graphRequestID(500)))
	same("begin of the call in doubt", begin("", "pay", "pay", savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, "12", ""))
	same("begin of a recorded call", begin("", "send", "send_email", savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, "12", ""))
	same("begin with another input", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "main", ToolUseId: "send", Name: "send_email", InputJson: `{}`})
	})
	same("retried record", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.RecordThreadEffect(ctx, &savepointv1.RecordThreadEffectRequest{ThreadId: "main", ToolUseId: "send", Attempt: 1,
			Output: &savepointv1.TypedValue{Type: "json", Data: []byte(`"sent"`)}, RequestId: graphRequestID(501)})
	})
	same("late begin in the deleted thread", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "gone", ToolUseId: "doomed", Name: "pay",
			InputJson: `{"call":"doomed"}`, CheckpointId: "02"})
	})
	same("ListThreadEffects main", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: "main"})
	})
	same("delete for runs", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return c.DeleteForRuns(ctx, &savepointv1.DeleteForRunsRequest{RunIds: []string{"run-a"}})
	})
	same("ListCheckpoints after the writes", func(c savepointv1.GraphCheckpointServiceClient) (any, error) {
		return graphtest.List(ctx, c, &savepointv1.ListCheckpointsRequest{}, 0)
	})
}

// TestMigrateStoreGraphVerification: a copy that lost a ledger entry or a
// pending write is not equal, and migrate.CompareGraph says which thread and
// record; a thread the target holds already is refused by name under
// --allow-non-empty.
func TestMigrateStoreGraphVerification(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dir := t.TempDir()
	fillGraph(t, dir)
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db)}, envOf(nil), io.Discard, io.Discard); code != exitOK {
		t.Fatalf("migrate-store: exit %d", code)
	}
	var stderr bytes.Buffer
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db), "--allow-non-empty"}, envOf(nil), io.Discard, &stderr); code != exitData ||
		!strings.Contains(stderr.String(), `thread "big"`) {
		t.Errorf("migrate over a copied thread: exit %d\n%s", code, stderr.String())
	}

	ctx := context.Background()
	src, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	cfg := migrate.Config{Source: src, Target: dst, SourceName: dir, TargetName: srv.URL(db)}

	// A copy that lost a ledger entry.
	srv.Exec(t, db, "DELETE FROM savepoint.graph_effects WHERE thread_id = 'main' AND tool_use_id = 'send'")
	if err := migrate.CompareGraph(ctx, cfg, 6); err == nil || errors.Is(err, migrate.ErrRefused) ||
		!strings.Contains(err.Error(), `graph thread "main": the records differ`) || !strings.Contains(err.Error(), `effect ""/"send"`) {
		t.Errorf("CompareGraph over a lost ledger entry: %v", err)
	}
	if err := storecompare.GraphReads(ctx, src, dst, &core.GraphThreadDump{ThreadID: "main"}); err == nil || !strings.Contains(err.Error(), "ListThreadEffects differs") {
		t.Errorf("compareGraphReads over a lost ledger entry: %v", err)
	}

	// A copy that lost a pending write.
	srv.Exec(t, db, "DELETE FROM savepoint.graph_writes WHERE thread_id = 'main' AND task_id = 'task-2'")
	if err := migrate.CompareGraph(ctx, cfg, 6); err == nil || !strings.Contains(err.Error(), `graph thread "main": the records differ`) ||
		!strings.Contains(err.Error(), `"task-2"`) {
		t.Errorf("CompareGraph over a lost write: %v", err)
	}
	// The GraphStore reads see the loss too.
	if err := storecompare.GraphReads(ctx, src, dst, &core.GraphThreadDump{ThreadID: "main"}); err == nil || !strings.Contains(err.Error(), "ListCheckpoints differs") {
		t.Errorf("compareGraphReads over a lost write: %v", err)
	}
}

// sameTuples compares two clients' reassembled tuples field by field.
func sameTuples(a, b []*graphtest.Tuple) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i].Checkpoint, b[i].Checkpoint) || len(a[i].Blobs) != len(b[i].Blobs) || len(a[i].Writes) != len(b[i].Writes) {
			return false
		}
		for j := range a[i].Blobs {
			if !proto.Equal(a[i].Blobs[j], b[i].Blobs[j]) {
				return false
			}
		}
		for j := range a[i].Writes {
			if !proto.Equal(a[i].Writes[j], b[i].Writes[j]) {
				return false
			}
		}
	}
	return true
}
