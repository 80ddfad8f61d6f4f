package graphtest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func testDeleteThread(t *testing.T, e *Env) {
	n0 := records(t, e)
	for _, nsName := range []string{"", "child:1", "child:1|grand:2"} {
		mustPut(t, e, cp("t", nsName, "1", "", "{}", map[string]string{"a": "1"}), blob("a", "1", "A"))
		mustWrites(t, e, "t", nsName, "1", "task", "", cw(0, "a", "1"))
	}
	mustPut(t, e, cp("other", "", "1", "", "{}", map[string]string{"a": "1"}), blob("a", "1", "A"))
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"}); len(ts) != 0 {
		t.Fatalf("deleted thread lists %q", ids(ts))
	}
	if tp := get(t, e, "other", "", ""); tp == nil || blobsOf(tp)["a@1"] != "A" {
		t.Fatalf("the other thread was touched: %v", tp)
	}
	// Only the tombstone (the thread's head) and the other thread remain:
	// one head, one checkpoint, one blob for "other", one head for "t".
	if n := records(t, e); n != n0+4 {
		t.Fatalf("%d records after the delete, want %d: the delete left records behind", n, n0+4)
	}
	// Deleting again, or an unknown thread, is fine.
	for _, th := range []string{"t", "never"} {
		if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: th}); err != nil {
			t.Fatal(err)
		}
	}
	// The thread can be used again; a put is explicit and re-creates it.
	mustPut(t, e, cp("t", "", "1", "", `{"again":true}`, map[string]string{"a": "1"}), blob("a", "1", "B"))
	if tp := get(t, e, "t", "", ""); blobsOf(tp)["a@1"] != "B" || len(tp.Writes) != 0 {
		t.Fatalf("re-created thread: blobs %v writes %v", blobsOf(tp), tp.Writes)
	}
}

// testLateWrite checks the late-write rule: a PutWrites for a checkpoint of
// a deleted thread (its id not above the greatest the thread held) is
// acknowledged as dropped and brings nothing back; writes for a checkpoint
// made after the delete are stored, even before that checkpoint arrives.
func testLateWrite(t *testing.T, e *Env) {
	mustPut(t, e, cp("t", "", "1ef-01", "", "{}", nil))
	mustPut(t, e, cp("t", "sub", "1ef-02", "", "{}", nil))
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	n0 := records(t, e)
	for _, late := range [][2]string{{"", "1ef-01"}, {"sub", "1ef-02"}, {"", "1ef-00"}, {"sub", "1ef-01"}} {
		res := mustWrites(t, e, "t", late[0], late[1], "task", "", cw(0, "a", `"late"`), cw(-1, "__error__", `"late"`))
		if !res.DroppedLate || res.WrittenCount != 0 {
			t.Fatalf("late write to %q: %v, want dropped", late, res)
		}
	}
	if ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"}); len(ts) != 0 {
		t.Fatalf("late writes brought back %q", ids(ts))
	}
	if n := records(t, e); n != n0 {
		t.Fatalf("late writes stored %d records", n-n0)
	}
	// A new run on the same thread: its checkpoint ids are greater, and its
	// writes are kept even when they arrive before their checkpoint.
	if res := mustWrites(t, e, "t", "", "1ef-03", "task", "", cw(0, "a", `"new"`)); res.DroppedLate || res.WrittenCount != 1 {
		t.Fatalf("write of a new checkpoint: %v", res)
	}
	mustPut(t, e, cp("t", "", "1ef-03", "", "{}", nil))
	if got := writesOf(get(t, e, "t", "", "")); !slices.Equal(got, []string{`/task/0/a="new"`}) {
		t.Fatalf("new run's writes %q", got)
	}
	// A checkpoint stored again after the delete accepts writes again.
	mustPut(t, e, cp("t", "", "1ef-01", "", "{}", nil))
	if res := mustWrites(t, e, "t", "", "1ef-01", "task", "", cw(0, "a", `"again"`)); res.DroppedLate || res.WrittenCount != 1 {
		t.Fatalf("write to a re-put checkpoint: %v", res)
	}
	// The rule survives a restart.
	if e.Restart != nil {
		e = e.Restart(t)
		if res := mustWrites(t, e, "t", "sub", "1ef-02", "task", "", cw(1, "a", `"late"`)); !res.DroppedLate {
			t.Fatalf("late write after a restart: %v", res)
		}
	}
}

func testDeleteForRuns(t *testing.T, e *Env) {
	mustPut(t, e, cp("t1", "", "1", "", `{"run_id":"r1"}`, map[string]string{"a": "1"}), blob("a", "1", "A1"))
	mustPut(t, e, cp("t1", "", "2", "1", `{"run_id":"r2"}`, map[string]string{"a": "1", "b": "1"}), blob("b", "1", "B1"))
	mustPut(t, e, cp("t1", "", "3", "2", `{"run_id":"r1"}`, map[string]string{"a": "3"}), blob("a", "3", "A3"))
	mustPut(t, e, cp("t1", "child", "1", "", `{"run_id":"r1"}`, nil))
	mustPut(t, e, cp("t2", "", "1", "", `{"run_id":"r1"}`, nil))
	mustPut(t, e, cp("t2", "", "2", "", `{"run_id":"r3"}`, nil))
	mustPut(t, e, cp("t2", "", "3", "", `{"run_id":7}`, nil))
	mustWrites(t, e, "t1", "", "3", "task", "", cw(0, "a", "1"))
	res, err := e.Graph.DeleteForRuns(ctx, &savepointv1.DeleteForRunsRequest{RunIds: []string{"r1", "unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedCheckpoints != 4 {
		t.Fatalf("deleted %d checkpoints, want 4", res.DeletedCheckpoints)
	}
	wantIDs(t, list(t, e, &savepointv1.ListCheckpointsRequest{}), "3", "2", "2")
	// The kept checkpoint of run r2 still has both its blobs, the one put
	// with a deleted checkpoint included.
	if got, want := blobsOf(get(t, e, "t1", "", "2")), map[string]string{"a@1": "A1", "b@1": "B1"}; !mapsEqual(got, want) {
		t.Fatalf("kept checkpoint's blobs %v, want %v", got, want)
	}
	// Re-putting the deleted checkpoint shows its blob a@3 and writes were
	// removed with it, not left behind.
	mustPut(t, e, cp("t1", "", "3", "2", `{}`, map[string]string{"a": "3"}))
	if tp := get(t, e, "t1", "", "3"); len(tp.Blobs) != 0 || len(tp.Writes) != 0 {
		t.Fatalf("the deleted checkpoint's blobs %v or writes %v remain", blobsOf(tp), writesOf(tp))
	}
	if _, err := e.Graph.DeleteForRuns(ctx, &savepointv1.DeleteForRunsRequest{}); err != nil {
		t.Fatalf("empty run ids: %v", err)
	}
}

func testCopyThread(t *testing.T, e *Env) {
	for _, nsName := range []string{"", "child:1"} {
		parent := ""
		for i := range 4 {
			id := fmt.Sprintf("1ef-%d", i)
			mustPut(t, e, cp("src", nsName, id, parent, fmt.Sprintf(`{"step":%d}`, i), map[string]string{"a": fmt.Sprint(i)}), blob("a", fmt.Sprint(i), "A"+id))
			parent = id
		}
	}
	mustWrites(t, e, "src", "", "1ef-3", "task", "path", cw(0, "ch", `"w"`), cw(-1, "__error__", `"e"`))
	// A big value (an upload's chunks) is copied too.
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10) // 3.2 MiB
	up := &savepointv1.PutCheckpointRequest{
		Checkpoint: cp("src", "", "1ef-9", "1ef-3", `{"step":9}`, map[string]string{"big": "1"}),
		Blobs:      []*savepointv1.ChannelBlob{{Channel: "big", Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: big}}},
	}
	if _, err := Upload(ctx, e.Graph, up, 1<<20); err != nil {
		t.Fatal(err)
	}
	// The target's own content is replaced.
	mustPut(t, e, cp("dst", "", "0-old", "", "{}", nil))
	src := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "src"})
	res, err := e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "src", TargetThreadId: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	if res.CopiedCheckpoints != 9 {
		t.Fatalf("copied %d checkpoints, want 9", res.CopiedCheckpoints)
	}
	dst := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "dst"})
	if !slices.Equal(ids(src), ids(dst)) {
		t.Fatalf("copy order %q, source %q", ids(dst), ids(src))
	}
	for i := range src {
		s, d := src[i], dst[i]
		if d.Checkpoint.ThreadId != "dst" {
			t.Fatalf("copied checkpoint in thread %q", d.Checkpoint.ThreadId)
		}
		d.Checkpoint.ThreadId = "src"
		if !proto.Equal(s.Checkpoint, d.Checkpoint) || !mapsEqual(blobsOf(s), blobsOf(d)) || !slices.Equal(writesOf(s), writesOf(d)) {
			t.Fatalf("copy of %s differs:\n%v\n%v", s.Checkpoint.CheckpointId, s, d)
		}
	}
	if !bytes.Equal([]byte(blobsOf(dst[0])["big@1"]), big) {
		t.Fatal("the big blob was not copied intact")
	}
	// The copy is independent: deleting the source leaves it whole.
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "src"}); err != nil {
		t.Fatal(err)
	}
	if tp := get(t, e, "dst", "", ""); tp == nil || !bytes.Equal([]byte(blobsOf(tp)["big@1"]), big) {
		t.Fatal("deleting the source damaged the copy")
	}
	// A missing source gives an empty target.
	if _, err := e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "none", TargetThreadId: "dst"}); err != nil {
		t.Fatal(err)
	}
	if ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "dst"}); len(ts) != 0 {
		t.Fatalf("copy of a missing thread left %q", ids(ts))
	}
	_, err = e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "x", TargetThreadId: "x"})
	wantReason(t, err, codes.InvalidArgument, "INVALID_GRAPH_KEY", "target_thread_id")
}

func testPrune(t *testing.T, e *Env) {
	// Root: the latest checkpoint references a blob put with an older one.
	mustPut(t, e, cp("t", "", "1", "", "{}", map[string]string{"a": "1", "b": "1"}), blob("a", "1", "A1"), blob("b", "1", "B1"))
	mustPut(t, e, cp("t", "", "2", "1", "{}", map[string]string{"a": "2", "b": "1"}), blob("a", "2", "A2"))
	mustPut(t, e, cp("t", "", "3", "2", "{}", map[string]string{"a": "3", "b": "1"}), blob("a", "3", "A3"))
	mustWrites(t, e, "t", "", "2", "task", "", cw(0, "x", "old"))
	mustWrites(t, e, "t", "", "3", "task", "", cw(0, "x", "latest"))
	mustPut(t, e, cp("t", "child", "5", "", "{}", nil))
	mustPut(t, e, cp("t", "child", "6", "5", "{}", nil))
	mustPut(t, e, cp("keep", "", "1", "", "{}", nil))
	mustPut(t, e, cp("keep", "", "2", "", "{}", nil))
	res, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"t", "missing"}, Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedCheckpoints != 3 {
		t.Fatalf("pruned %d, want 3", res.DeletedCheckpoints)
	}
	wantIDs(t, list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"}), "6", "3")
	tp := get(t, e, "t", "", "")
	if got, want := blobsOf(tp), map[string]string{"a@3": "A3", "b@1": "B1"}; !mapsEqual(got, want) {
		t.Fatalf("latest's blobs %v, want %v", got, want)
	}
	if got := writesOf(tp); !slices.Equal(got, []string{"/task/0/x=latest"}) {
		t.Fatalf("latest's writes %q", got)
	}
	// The pruned checkpoints' own blobs and writes went with them.
	mustPut(t, e, cp("t", "", "2", "1", "{}", map[string]string{"a": "2"}))
	if tp := get(t, e, "t", "", "2"); len(tp.Blobs)+len(tp.Writes) != 0 {
		t.Fatalf("pruned checkpoint left blobs %v writes %v", blobsOf(tp), writesOf(tp))
	}
	wantIDs(t, list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "keep"}), "2", "1")

	res, err = e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"keep"}, Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_DELETE})
	if err != nil || res.DeletedCheckpoints != 2 {
		t.Fatalf("prune delete: %v %v", res, err)
	}
	if ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "keep"}); len(ts) != 0 {
		t.Fatalf("prune delete left %q", ids(ts))
	}
	if _, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST}); err != nil {
		t.Fatalf("empty prune: %v", err)
	}
}

// testBigDelete deletes, copies and prunes a thread of more records than
// one transaction can delete (the batched purge behind a tombstone).
func testBigDelete(t *testing.T, e *Env) {
	n0 := records(t, e)
	const checkpoints, writesPer = 60, 40 // 2,400 writes: more than two purge batches
	for i := range checkpoints {
		id := fmt.Sprintf("%04d", i)
		mustPut(t, e, cp("big", fmt.Sprintf("ns%d", i%3), id, "", "{}", map[string]string{"a": id}), blob("a", id, "A"))
		ws := make([]*savepointv1.ChannelWrite, writesPer)
		for j := range ws {
			ws[j] = cw(int32(j), "c", `"x"`)
		}
		mustWrites(t, e, "big", fmt.Sprintf("ns%d", i%3), id, "task", "", ws...)
	}
	res, err := e.Graph.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: "big", TargetThreadId: "big2"})
	if err != nil || res.CopiedCheckpoints != checkpoints {
		t.Fatalf("copy: %v %v", res, err)
	}
	if got := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "big2"}); len(got) != checkpoints || len(got[0].Writes) != writesPer {
		t.Fatalf("copy holds %d checkpoints", len(got))
	}
	for _, th := range []string{"big", "big2"} {
		if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: th}); err != nil {
			t.Fatal(err)
		}
		if got := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: th}); len(got) != 0 {
			t.Fatalf("%s lists %d checkpoints after its delete", th, len(got))
		}
	}
	if n := records(t, e); n != n0+2 {
		t.Fatalf("%d records after the deletes, want %d (two tombstones)", n, n0+2)
	}
}
