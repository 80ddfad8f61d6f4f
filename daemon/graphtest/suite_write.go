package graphtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func testPutGet(t *testing.T, e *Env) {
	mustPut(t, e, cp("t1", "", "1", "", `{"step":0,"source":"input"}`, map[string]string{"a": "1", "b": "1"}),
		blob("a", "1", "A1"), blob("b", "1", "B1"))
	mustPut(t, e, cp("t1", "", "2", "1", `{"step":1}`, map[string]string{"a": "2", "b": "1", "c": "9"}),
		blob("a", "2", "A2"), blob("x", "1", "unreferenced"))
	mustWrites(t, e, "t1", "", "2", "task1", "p", cw(0, "a", `"w0"`), cw(1, "b", `"w1"`))

	tp := get(t, e, "t1", "", "")
	c := tp.Checkpoint
	if c.CheckpointId != "2" || c.ParentCheckpointId != "1" || c.MetadataJson != `{"step":1}` || c.ThreadId != "t1" ||
		string(c.GetCheckpoint().GetData()) != `{"id":"2"}` || c.GetCheckpoint().GetType() != "json" || c.ChannelVersions["c"] != "9" {
		t.Fatalf("latest checkpoint %v", c)
	}
	// Blobs resolve through channel_versions: a's new version, b's from the
	// first put, none for c (never stored), never the unreferenced one.
	if got, want := blobsOf(tp), map[string]string{"a@2": "A2", "b@1": "B1"}; !mapsEqual(got, want) {
		t.Fatalf("blobs %v, want %v", got, want)
	}
	if got := writesOf(tp); !slices.Equal(got, []string{`p/task1/0/a="w0"`, `p/task1/1/b="w1"`}) {
		t.Fatalf("writes %q", got)
	}
	old := get(t, e, "t1", "", "1")
	if got, want := blobsOf(old), map[string]string{"a@1": "A1", "b@1": "B1"}; !mapsEqual(got, want) || len(old.Writes) != 0 {
		t.Fatalf("checkpoint 1: blobs %v writes %v", got, old.Writes)
	}
	for _, miss := range [][3]string{{"t1", "", "3"}, {"t1", "other", ""}, {"t2", "", ""}, {"t2", "", "1"}} {
		if tp := get(t, e, miss[0], miss[1], miss[2]); tp != nil {
			t.Errorf("get %q found %v", miss, tp.Checkpoint)
		}
	}
	// An empty metadata_json is stored as {}.
	mustPut(t, e, cp("t1", "sub", "1", "", "", nil))
	if md := get(t, e, "t1", "sub", "").Checkpoint.MetadataJson; md != "{}" {
		t.Fatalf("empty metadata stored as %q", md)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func testUpsert(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "1", "", `{"v":1}`, map[string]string{"a": "1"}), blob("a", "1", "first"))
	// The same id again replaces the checkpoint; the blob already stored
	// for (a, 1) is kept.
	mustPut(t, e, cp("t", "", "1", "0", `{"v":2}`, map[string]string{"a": "1"}), blob("a", "1", "second"))
	tp := get(t, e, "t", "", "1")
	if tp.Checkpoint.MetadataJson != `{"v":2}` || tp.Checkpoint.ParentCheckpointId != "0" {
		t.Fatalf("upsert kept %v", tp.Checkpoint)
	}
	if got := blobsOf(tp)["a@1"]; got != "first" {
		t.Fatalf("blob (a, 1) = %q after a second insert; want the first, kept", got)
	}
	if n := len(list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"})); n != 1 {
		t.Fatalf("%d checkpoints after two puts of one id", n)
	}
}

func testLatestByteOrder(t *testing.T, e *Env) {
	for _, id := range []string{"1ef4-b", "1ef4-a", "1ef4-c", "1ef4-bb"} {
		mustPut(t, e, cp("t", "", id, "", "{}", nil))
	}
	if got := get(t, e, "t", "", "").Checkpoint.CheckpointId; got != "1ef4-c" {
		t.Fatalf("latest %q, want the greatest id by byte order", got)
	}
	wantIDs(t, list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"}), "1ef4-c", "1ef4-bb", "1ef4-b", "1ef4-a")
}

func testPutWrites(t *testing.T, e *Env) {
	// Writes before their checkpoint exists are kept and appear with it.
	res := mustWrites(t, e, "t", "", "1", "task", "", cw(0, "a", `"first"`), cw(1, "b", `"first"`))
	if res.WrittenCount != 2 || res.DroppedLate {
		t.Fatalf("first writes: %v", res)
	}
	mustPut(t, e, cp("t", "", "1", "", "{}", nil))
	// Insert-or-ignore on (task_id, idx).
	res = mustWrites(t, e, "t", "", "1", "task", "", cw(0, "a", `"second"`), cw(2, "c", `"new"`))
	if res.WrittenCount != 1 {
		t.Fatalf("insert-or-ignore wrote %d, want 1", res.WrittenCount)
	}
	// A call of special indexes only is an upsert.
	mustWrites(t, e, "t", "", "1", "task", "", cw(-1, "__error__", `"boom"`))
	res = mustWrites(t, e, "t", "", "1", "task", "", cw(-1, "__error__", `"boom again"`), cw(-3, "__interrupt__", `"ask"`))
	if res.WrittenCount != 2 {
		t.Fatalf("upsert wrote %d, want 2", res.WrittenCount)
	}
	// A mixed call is insert-or-ignore for all its writes.
	res = mustWrites(t, e, "t", "", "1", "task", "", cw(-1, "__error__", `"mixed"`), cw(3, "d", `"d"`))
	if res.WrittenCount != 1 {
		t.Fatalf("mixed call wrote %d, want 1 (d only)", res.WrittenCount)
	}
	want := []string{`/task/-3/__interrupt__="ask"`, `/task/-1/__error__="boom again"`, `/task/0/a="first"`,
		`/task/1/b="first"`, `/task/2/c="new"`, `/task/3/d="d"`}
	if got := writesOf(get(t, e, "t", "", "1")); !slices.Equal(got, want) {
		t.Fatalf("writes\n%q\nwant\n%q", got, want)
	}
}

func testWriteOrder(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "1", "", "{}", nil))
	// Sent in an order unlike the sort order; sorted by (task_path,
	// task_id, idx), which is not task_id order.
	mustWrites(t, e, "t", "", "1", "a-task", "~__pregel_pull, z", cw(1, "c", "1"), cw(0, "c", "0"))
	mustWrites(t, e, "t", "", "1", "z-task", "~__pregel_pull, a", cw(10, "c", "10"), cw(2, "c", "2"))
	mustWrites(t, e, "t", "", "1", "m-task", "~__pregel_pull, a", cw(0, "c", "0"))
	want := []string{"~__pregel_pull, a/m-task/0/c=0", "~__pregel_pull, a/z-task/2/c=2", "~__pregel_pull, a/z-task/10/c=10",
		"~__pregel_pull, z/a-task/0/c=0", "~__pregel_pull, z/a-task/1/c=1"}
	if got := writesOf(get(t, e, "t", "", "1")); !slices.Equal(got, want) {
		t.Fatalf("writes\n%q\nwant\n%q", got, want)
	}
}

func testRequestID(t *testing.T, e *Env) {
	rid := uuid.NewString()
	req := &savepointv1.PutCheckpointRequest{Checkpoint: cp("t", "", "1", "", `{"v":1}`, nil), RequestId: rid}
	if res, err := e.Graph.PutCheckpoint(ctx, req); err != nil || res.AlreadyApplied {
		t.Fatalf("first put: %v %v", res, err)
	}
	// A newer put of the same id, then a late retry of the first: the
	// retry is answered without undoing the newer put.
	mustPut(t, e, cp("t", "", "1", "", `{"v":2}`, nil))
	if res, err := e.Graph.PutCheckpoint(ctx, req); err != nil || !res.AlreadyApplied {
		t.Fatalf("retry: %v %v", res, err)
	}
	if md := get(t, e, "t", "", "1").Checkpoint.MetadataJson; md != `{"v":2}` {
		t.Fatalf("a late retry reverted the checkpoint to %s", md)
	}
	_, err := e.Graph.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: cp("t", "", "1", "", `{"v":3}`, nil), RequestId: rid})
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED", "")

	wid := uuid.NewString()
	wreq := &savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "task", Writes: []*savepointv1.ChannelWrite{cw(-1, "__error__", `"one"`)}, RequestId: wid}
	if res, err := e.Graph.PutWrites(ctx, wreq); err != nil || res.AlreadyApplied || res.WrittenCount != 1 {
		t.Fatalf("first writes: %v %v", res, err)
	}
	mustWrites(t, e, "t", "", "1", "task", "", cw(-1, "__error__", `"two"`))
	if res, err := e.Graph.PutWrites(ctx, wreq); err != nil || !res.AlreadyApplied {
		t.Fatalf("writes retry: %v %v", res, err)
	}
	if got := writesOf(get(t, e, "t", "", "1")); !slices.Equal(got, []string{`/task/-1/__error__="two"`}) {
		t.Fatalf("a late retry reverted the error write: %q", got)
	}
	wreq.Writes[0] = cw(-1, "__error__", `"three"`)
	_, err = e.Graph.PutWrites(ctx, wreq)
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED", "")
	// Deleting the thread forgets its request ids with it.
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Graph.PutCheckpoint(ctx, req); err != nil || res.AlreadyApplied {
		t.Fatalf("put after delete with an old request id: %v %v", res, err)
	}
}

func testBadInput(t *testing.T, e *Env) {
	mustPut(t, e, cp("seed", "", "1", "", `{"k":1}`, map[string]string{"a": "1"}), blob("a", "1", "A"))
	mustWrites(t, e, "seed", "", "1", "task", "", cw(0, "a", "1"))
	n0 := records(t, e)
	long := strings.Repeat("x", 513)
	good := func() *savepointv1.GraphCheckpoint { return cp("seed", "", "2", "1", "{}", nil) }
	with := func(f func(c *savepointv1.GraphCheckpoint)) *savepointv1.GraphCheckpoint { c := good(); f(c); return c }
	put := func(c *savepointv1.GraphCheckpoint, blobs ...*savepointv1.ChannelBlob) func() error {
		return func() error {
			_, err := e.Graph.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: c, Blobs: blobs})
			return err
		}
	}
	writes := func(r *savepointv1.PutWritesRequest) func() error {
		return func() error { _, err := e.Graph.PutWrites(ctx, r); return err }
	}
	wr := func(f func(r *savepointv1.PutWritesRequest)) *savepointv1.PutWritesRequest {
		r := &savepointv1.PutWritesRequest{ThreadId: "seed", CheckpointId: "1", TaskId: "t2", Writes: []*savepointv1.ChannelWrite{cw(5, "a", "1")}}
		f(r)
		return r
	}
	stream := func(f func() error) func() error { return f }
	for _, tc := range []struct {
		name          string
		call          func() error
		reason, field string
	}{
		{"put: no checkpoint", put(nil), "MISSING_FIELD", "checkpoint"},
		{"put: no thread", put(with(func(c *savepointv1.GraphCheckpoint) { c.ThreadId = "" })), "INVALID_GRAPH_KEY", "checkpoint.thread_id"},
		{"put: long thread", put(with(func(c *savepointv1.GraphCheckpoint) { c.ThreadId = long })), "INVALID_GRAPH_KEY", "checkpoint.thread_id"},
		{"put: NUL in namespace", put(with(func(c *savepointv1.GraphCheckpoint) { c.CheckpointNs = "a\x00b" })), "INVALID_GRAPH_KEY", "checkpoint.checkpoint_ns"},
		{"put: no id", put(with(func(c *savepointv1.GraphCheckpoint) { c.CheckpointId = "" })), "INVALID_GRAPH_KEY", "checkpoint.checkpoint_id"},
		{"put: long parent", put(with(func(c *savepointv1.GraphCheckpoint) { c.ParentCheckpointId = long })), "INVALID_GRAPH_KEY", "checkpoint.parent_checkpoint_id"},
		{"put: metadata not JSON", put(with(func(c *savepointv1.GraphCheckpoint) { c.MetadataJson = "{" })), "INVALID_JSON", "checkpoint.metadata_json"},
		{"put: metadata not an object", put(with(func(c *savepointv1.GraphCheckpoint) { c.MetadataJson = "[1]" })), "INVALID_JSON", "checkpoint.metadata_json"},
		{"put: metadata over the header limit", put(with(func(c *savepointv1.GraphCheckpoint) {
			c.MetadataJson = `{"k":"` + strings.Repeat("m", e.Budget) + `"}`
		})), "FIELD_TOO_LARGE", "checkpoint"},
		{"put: empty channel version", put(with(func(c *savepointv1.GraphCheckpoint) { c.ChannelVersions = map[string]string{"a": ""} })), "INVALID_GRAPH_KEY", `checkpoint.channel_versions["a"]`},
		{"put: long type", put(with(func(c *savepointv1.GraphCheckpoint) { c.Checkpoint.Type = strings.Repeat("t", 65) })), "FIELD_TOO_LARGE", "checkpoint.checkpoint.type"},
		{"put: wrong total_size", put(with(func(c *savepointv1.GraphCheckpoint) { c.Checkpoint.TotalSize = 99 })), "INVALID_ARGUMENT", "checkpoint.checkpoint.total_size"},
		{"put: blob without channel", put(good(), blob("", "1", "x")), "INVALID_GRAPH_KEY", "blobs[0].channel"},
		{"put: blob without version", put(good(), blob("a", "", "x")), "INVALID_GRAPH_KEY", "blobs[0].version"},
		{"put: blob twice", put(good(), blob("a", "2", "x"), blob("a", "2", "y")), "INVALID_GRAPH_KEY", "blobs[1]"},
		{"put: bad request id", func() error {
			_, err := e.Graph.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: good(), RequestId: "nope"})
			return err
		}, "INVALID_REQUEST_ID", "request_id"},
		{"writes: no thread", writes(wr(func(r *savepointv1.PutWritesRequest) { r.ThreadId = "" })), "INVALID_GRAPH_KEY", "thread_id"},
		{"writes: no checkpoint id", writes(wr(func(r *savepointv1.PutWritesRequest) { r.CheckpointId = "" })), "INVALID_GRAPH_KEY", "checkpoint_id"},
		{"writes: no task", writes(wr(func(r *savepointv1.PutWritesRequest) { r.TaskId = "" })), "INVALID_GRAPH_KEY", "task_id"},
		{"writes: long task path", writes(wr(func(r *savepointv1.PutWritesRequest) { r.TaskPath = strings.Repeat("p", 1025) })), "FIELD_TOO_LARGE", "task_path"},
		{"writes: none", writes(wr(func(r *savepointv1.PutWritesRequest) { r.Writes = nil })), "MISSING_FIELD", "writes"},
		{"writes: index -5", writes(wr(func(r *savepointv1.PutWritesRequest) { r.Writes[0].Idx = -5 })), "INVALID_GRAPH_KEY", "writes[0].idx"},
		{"writes: index twice", writes(wr(func(r *savepointv1.PutWritesRequest) { r.Writes = append(r.Writes, cw(5, "b", "2")) })), "INVALID_GRAPH_KEY", "writes[1].idx"},
		{"writes: no channel", writes(wr(func(r *savepointv1.PutWritesRequest) { r.Writes[0].Channel = "" })), "INVALID_GRAPH_KEY", "writes[0].channel"},
		{"get: no thread", stream(func() error {
			_, err := Get(ctx, e.Graph, &savepointv1.GetCheckpointRequest{}, 0)
			return err
		}), "INVALID_GRAPH_KEY", "thread_id"},
		{"get: NUL id", stream(func() error {
			_, err := Get(ctx, e.Graph, &savepointv1.GetCheckpointRequest{ThreadId: "seed", CheckpointId: "\x00"}, 0)
			return err
		}), "INVALID_GRAPH_KEY", "checkpoint_id"},
		{"list: negative limit", stream(func() error {
			_, err := List(ctx, e.Graph, &savepointv1.ListCheckpointsRequest{Limit: -1}, 0)
			return err
		}), "INVALID_PAGE_SIZE", "limit"},
		{"list: filter not JSON", stream(func() error {
			_, err := List(ctx, e.Graph, &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": "input"}}, 0)
			return err
		}), "INVALID_JSON", `metadata_filter["source"]`},
		{"delete: no thread", func() error {
			_, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{})
			return err
		}, "INVALID_GRAPH_KEY", "thread_id"},
		{"delete for runs: empty run id", func() error {
			_, err := e.Graph.DeleteForRuns(ctx, &savepointv1.DeleteForRunsRequest{RunIds: []string{"r", ""}})
			return err
		}, "INVALID_GRAPH_KEY", "run_ids[1]"},
		{"copy: no target", func() error {
			_, err := e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "seed"})
			return err
		}, "INVALID_GRAPH_KEY", "target_thread_id"},
		{"prune: no strategy", func() error {
			_, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"seed"}})
			return err
		}, "MISSING_FIELD", "strategy"},
		{"prune: too many threads", func() error {
			_, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: make([]string, 1001), Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_DELETE})
			return err
		}, "FIELD_TOO_LARGE", "thread_ids"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantReason(t, tc.call(), codes.InvalidArgument, tc.reason, tc.field) })
	}
	if n := records(t, e); n != n0 {
		t.Fatalf("bad input changed the store: %d records, was %d", n, n0)
	}
	tp := get(t, e, "seed", "", "")
	if tp.Checkpoint.CheckpointId != "1" || tp.Checkpoint.MetadataJson != `{"k":1}` || len(tp.Writes) != 1 {
		t.Fatalf("bad input changed the seed: %v", tp)
	}
}
