package graphtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Env is one serving daemon for one test of the suite.
type Env struct {
	Graph    savepointv1.GraphCheckpointServiceClient
	Sessions savepointv1.SavepointServiceClient
	// Budget is the daemon's response budget; every message is checked
	// against it.
	Budget int
	// Restart stops the daemon and starts it again on the same data,
	// returning new clients; nil skips the tests that need it.
	Restart func(t *testing.T) *Env
	// UploadBlobBytes is the size of each of the four blobs Upload streams;
	// 0 means 16 MiB (a 64 MiB checkpoint).
	UploadBlobBytes int
}

// Run runs the suite; newEnv starts an empty daemon that the test owns.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, e *Env)
	}{
		{"PutGet", testPutGet},
		{"Upsert", testUpsert},
		{"LatestByteOrder", testLatestByteOrder},
		{"PutWrites", testPutWrites},
		{"WriteOrder", testWriteOrder},
		{"List", testList},
		{"DeleteThread", testDeleteThread},
		{"LateWrite", testLateWrite},
		{"DeleteForRuns", testDeleteForRuns},
		{"CopyThread", testCopyThread},
		{"Prune", testPrune},
		{"RequestID", testRequestID},
		{"BadInput", testBadInput},
		{"BudgetChunking", testBudgetChunking},
		{"Upload", testUpload},
		{"UploadErrors", testUploadErrors},
		{"AtomicVisibility", testAtomicVisibility},
		{"BigDelete", testBigDelete},
		{"Restart", testRestart},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t)) })
	}
}

var ctx = context.Background()

// ---------------------------------------------------------------------------
// Builders and readers

func value(typ, data string) *savepointv1.TypedValue {
	return &savepointv1.TypedValue{Type: typ, Data: []byte(data)}
}

func cp(thread, ns, id, parent, md string, versions map[string]string) *savepointv1.GraphCheckpoint {
	return &savepointv1.GraphCheckpoint{
		ThreadId: thread, CheckpointNs: ns, CheckpointId: id, ParentCheckpointId: parent,
		Checkpoint: value("json", `{"id":"`+id+`"}`), ChannelVersions: versions, MetadataJson: md,
	}
}

func blob(ch, ver, data string) *savepointv1.ChannelBlob {
	return &savepointv1.ChannelBlob{Channel: ch, Version: ver, Value: value("msgpack", data)}
}

func mustPut(t *testing.T, e *Env, c *savepointv1.GraphCheckpoint, blobs ...*savepointv1.ChannelBlob) {
	t.Helper()
	if _, err := e.Graph.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: c, Blobs: blobs}); err != nil {
		t.Fatalf("put %s/%q/%s: %v", c.ThreadId, c.CheckpointNs, c.CheckpointId, err)
	}
}

func mustWrites(t *testing.T, e *Env, thread, ns, id, task, path string, ws ...*savepointv1.ChannelWrite) *savepointv1.PutWritesResponse {
	t.Helper()
	res, err := e.Graph.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: thread, CheckpointNs: ns, CheckpointId: id, TaskId: task, TaskPath: path, Writes: ws})
	if err != nil {
		t.Fatalf("put writes %s/%s/%s: %v", thread, id, task, err)
	}
	return res
}

func cw(idx int32, ch, data string) *savepointv1.ChannelWrite {
	return &savepointv1.ChannelWrite{Idx: idx, Channel: ch, Value: value("json", data)}
}

func get(t *testing.T, e *Env, thread, ns, id string) *Tuple {
	t.Helper()
	tp, err := Get(ctx, e.Graph, &savepointv1.GetCheckpointRequest{ThreadId: thread, CheckpointNs: ns, CheckpointId: id}, e.Budget)
	if err != nil {
		t.Fatalf("get %s/%q/%s: %v", thread, ns, id, err)
	}
	return tp
}

func list(t *testing.T, e *Env, req *savepointv1.ListCheckpointsRequest) []*Tuple {
	t.Helper()
	ts, err := List(ctx, e.Graph, req, e.Budget)
	if err != nil {
		t.Fatalf("list %v: %v", req, err)
	}
	return ts
}

func ids(ts []*Tuple) []string {
	var out []string
	for _, tp := range ts {
		out = append(out, tp.Checkpoint.GetCheckpointId())
	}
	return out
}

func blobsOf(tp *Tuple) map[string]string {
	m := map[string]string{}
	for _, b := range tp.Blobs {
		m[b.Channel+"@"+b.Version] = string(b.GetValue().GetData())
	}
	return m
}

func writesOf(tp *Tuple) []string {
	var out []string
	for _, w := range tp.Writes {
		out = append(out, fmt.Sprintf("%s/%s/%d/%s=%s", w.TaskPath, w.TaskId, w.Idx, w.Channel, w.GetValue().GetData()))
	}
	return out
}

func ns(s string) *string { return &s }

func wantIDs(t *testing.T, got []*Tuple, want ...string) {
	t.Helper()
	if g := ids(got); !slices.Equal(g, want) {
		t.Fatalf("checkpoint ids %q, want %q", g, want)
	}
}

// wantReason checks err's code, ErrorInfo reason and, when field is set,
// the field the ErrorInfo names.
func wantReason(t *testing.T, err error, code codes.Code, reason, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, code)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.Reason != reason || info.Domain != "savepoint.v1" {
				t.Fatalf("reason %s/%s, want savepoint.v1/%s (%v)", info.Domain, info.Reason, reason, err)
			}
			if field != "" && info.Metadata["field"] != field {
				t.Fatalf("field %q, want %q (%v)", info.Metadata["field"], field, err)
			}
			return
		}
	}
	t.Fatalf("%v has no ErrorInfo", err)
}

// records returns the number of records Verify reads: the whole store.
func records(t *testing.T, e *Env) uint64 {
	t.Helper()
	rep, err := e.Sessions.Verify(ctx, &savepointv1.VerifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DamagedSessions) > 0 {
		t.Fatalf("Verify reports damage: %v", rep.DamagedSessions)
	}
	return rep.CheckedRecords
}

// ---------------------------------------------------------------------------
// Tests

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

func testList(t *testing.T, e *Env) {
	mustPut(t, e, cp("t1", "", "01", "", `{"source":"input","step":0,"run_id":"r1"}`, nil))
	mustPut(t, e, cp("t1", "", "03", "01", `{"source":"loop","step":1,"nested":{"k":[1,2]}}`, nil))
	mustPut(t, e, cp("t1", "child:1", "02", "", `{"source":"loop","step":1.0}`, nil))
	mustPut(t, e, cp("t2", "", "04", "", `{"source":"input","step":2}`, nil))
	mustWrites(t, e, "t1", "", "03", "task", "", cw(0, "ch", `"v"`))

	for _, tc := range []struct {
		name string
		req  *savepointv1.ListCheckpointsRequest
		want []string
	}{
		{"thread, every namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1"}, []string{"03", "02", "01"}},
		{"root namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns("")}, []string{"03", "01"}},
		{"child namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns("child:1")}, []string{"02"}},
		{"every thread", &savepointv1.ListCheckpointsRequest{}, []string{"04", "03", "02", "01"}},
		{"every thread, root", &savepointv1.ListCheckpointsRequest{CheckpointNs: ns("")}, []string{"04", "03", "01"}},
		{"before", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", BeforeCheckpointId: "03"}, []string{"02", "01"}},
		{"before is strict", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", BeforeCheckpointId: "01"}, nil},
		{"limit", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", Limit: 2}, []string{"03", "02"}},
		{"limit and before", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", Limit: 1, BeforeCheckpointId: "03"}, []string{"02"}},
		{"filter string", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"input"`}}, []string{"04", "01"}},
		{"filter number (1 equals 1.0)", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", MetadataFilter: map[string]string{"step": "1"}}, []string{"03", "02"}},
		{"filter two keys", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"input"`, "step": "2"}}, []string{"04"}},
		{"filter object", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"nested": `{"k": [1, 2]}`}}, []string{"03"}},
		{"filter missing key", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"nope": `null`}}, nil},
		{"filter no match", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", MetadataFilter: map[string]string{"source": `"update"`}}, nil},
		{"filter is not a substring match", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"in"`}}, nil},
		{"unknown thread", &savepointv1.ListCheckpointsRequest{ThreadId: "t3"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { wantIDs(t, list(t, e, tc.req), tc.want...) })
	}
	// Listed tuples carry their writes and metadata as stored.
	ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns(""), Limit: 1})
	if got := writesOf(ts[0]); !slices.Equal(got, []string{`/task/0/ch="v"`}) || ts[0].Checkpoint.MetadataJson != `{"source":"loop","step":1,"nested":{"k":[1,2]}}` {
		t.Fatalf("listed tuple: writes %q metadata %s", got, ts[0].Checkpoint.MetadataJson)
	}
}

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

// testBudgetChunking stores values just under the request limit in
// several writes and blobs and reads them back through messages that each
// stay under the response budget.
func testBudgetChunking(t *testing.T, e *Env) {
	payload := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	// Each big value needs at least two messages, and one fits a request.
	size := min(e.Budget+e.Budget/3, 3<<20+1<<19)
	c := cp("t", "", "1", "", "{}", map[string]string{"a": "1", "b": "1", "e": "1"})
	mustPut(t, e, c, &savepointv1.ChannelBlob{Channel: "a", Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 2)}})
	c.Checkpoint = &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 1)}
	mustPut(t, e, c,
		&savepointv1.ChannelBlob{Channel: "b", Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(10, 3)}},
		&savepointv1.ChannelBlob{Channel: "e", Version: "1", Value: &savepointv1.TypedValue{Type: "empty"}})
	mustWrites(t, e, "t", "", "1", "task", "", &savepointv1.ChannelWrite{Idx: 0, Channel: "w", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 4)}})
	mustWrites(t, e, "t", "", "1", "task", "", &savepointv1.ChannelWrite{Idx: 1, Channel: "w", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(3, 5)}})
	check := func(tp *Tuple) {
		t.Helper()
		if !bytes.Equal(tp.Checkpoint.GetCheckpoint().GetData(), payload(size, 1)) {
			t.Fatal("checkpoint value not intact")
		}
		if len(tp.Blobs) != 3 || !bytes.Equal(tp.Blobs[0].GetValue().GetData(), payload(size, 2)) ||
			!bytes.Equal(tp.Blobs[1].GetValue().GetData(), payload(10, 3)) || tp.Blobs[2].GetValue().GetType() != "empty" || len(tp.Blobs[2].GetValue().GetData()) != 0 {
			t.Fatalf("blobs not intact: %d", len(tp.Blobs))
		}
		if len(tp.Writes) != 2 || !bytes.Equal(tp.Writes[0].GetValue().GetData(), payload(size, 4)) || !bytes.Equal(tp.Writes[1].GetValue().GetData(), payload(3, 5)) {
			t.Fatal("writes not intact")
		}
	}
	check(get(t, e, "t", "", "1"))
	mustPut(t, e, cp("t", "", "2", "", "{}", nil))
	ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"})
	wantIDs(t, ts, "2", "1")
	check(ts[1])
}

// bigBlob returns n bytes: a random block of a length prime to every chunk
// size, repeated, so that a misplaced chunk changes the bytes read back.
func bigBlob(n int, seed uint64) []byte {
	block := make([]byte, 65521)
	x := seed | 1
	for i := range block {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		block[i] = byte(x)
	}
	return bytes.Repeat(block, n/len(block)+1)[:n]
}

// testUpload streams a 64 MiB checkpoint (four 16 MiB blobs and a 1 MiB
// checkpoint value, unless Env.UploadBlobBytes says otherwise) and reads it
// back intact.
func testUpload(t *testing.T, e *Env) {
	blobBytes := e.UploadBlobBytes
	if blobBytes == 0 {
		blobBytes = 16 << 20
	}
	n0 := records(t, e)
	c := cp("t", "", "1", "", `{"big":true}`, map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "empty": "1"})
	c.Checkpoint = &savepointv1.TypedValue{Type: "msgpack", Data: bigBlob(1<<20+3, 1)}
	req := &savepointv1.PutCheckpointRequest{Checkpoint: c, RequestId: uuid.NewString()}
	sums := map[string][32]byte{}
	for i, ch := range []string{"a", "b", "c", "d"} {
		data := bigBlob(blobBytes+i, uint64(i+2))
		sums[ch] = sha256.Sum256(data)
		req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: ch, Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: data}})
	}
	req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: "empty", Version: "1", Value: &savepointv1.TypedValue{Type: "empty"}})
	res, err := Upload(ctx, e.Graph, req, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReceivedBytes != int64(4*blobBytes+1<<20+3+6) || res.AlreadyApplied {
		t.Fatalf("upload response %v", res)
	}
	check := func(e *Env) {
		t.Helper()
		tp := get(t, e, "t", "", "")
		if tp == nil || !bytes.Equal(tp.Checkpoint.GetCheckpoint().GetData(), c.Checkpoint.Data) || tp.Checkpoint.MetadataJson != `{"big":true}` {
			t.Fatal("uploaded checkpoint not read back intact")
		}
		if len(tp.Blobs) != 5 {
			t.Fatalf("%d blobs, want 5", len(tp.Blobs))
		}
		for _, b := range tp.Blobs[:4] {
			if sha256.Sum256(b.GetValue().GetData()) != sums[b.Channel] {
				t.Fatalf("blob %s not read back intact (%d bytes)", b.Channel, len(b.GetValue().GetData()))
			}
		}
		if tp.Blobs[4].Channel != "empty" || tp.Blobs[4].GetValue().GetType() != "empty" {
			t.Fatalf("empty blob %v", tp.Blobs[4])
		}
	}
	check(e)
	// The same upload again is answered from its request id.
	if res, err := Upload(ctx, e.Graph, req, 4<<20-1024); err != nil || !res.AlreadyApplied {
		t.Fatalf("retried upload: %v %v", res, err)
	}
	// A re-put of the id without the blobs keeps them (insert-if-absent)
	// and frees the old checkpoint value's chunks.
	mustPut(t, e, cp("t", "", "1", "", `{"big":false}`, c.ChannelVersions))
	if tp := get(t, e, "t", "", ""); len(tp.Blobs) != 5 || tp.Checkpoint.MetadataJson != `{"big":false}` {
		t.Fatalf("re-put: %d blobs, metadata %s", len(tp.Blobs), tp.Checkpoint.MetadataJson)
	}
	if e.Restart != nil {
		e = e.Restart(t)
		mustPut(t, e, c) // restore the uploaded value, inline now (1 MiB)
		check(e)
	}
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if n := records(t, e); n != n0+1 {
		t.Fatalf("%d records after deleting the uploaded thread, want %d (its tombstone)", n, n0+1)
	}
}

func testUploadErrors(t *testing.T, e *Env) {
	mustPut(t, e, cp("seed", "", "1", "", "{}", nil))
	n0 := records(t, e)
	start := func(size int64) *savepointv1.UploadCheckpointRequest {
		c := cp("t", "", "1", "", "{}", nil)
		c.Checkpoint = &savepointv1.TypedValue{Type: "bytes", TotalSize: size}
		return &savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Start{Start: &savepointv1.UploadCheckpointStart{Checkpoint: c}}}
	}
	chunk := func(n int) *savepointv1.UploadCheckpointRequest {
		return &savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Chunk{Chunk: make([]byte, n)}}
	}
	for _, tc := range []struct {
		name    string
		msgs    []*savepointv1.UploadCheckpointRequest
		reason  string
		field   string
		code    codes.Code
		unclose bool
	}{
		{"no message", nil, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"chunk first", []*savepointv1.UploadCheckpointRequest{chunk(3)}, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"two starts", []*savepointv1.UploadCheckpointRequest{start(3), start(3)}, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"too many bytes", []*savepointv1.UploadCheckpointRequest{start(3 << 20), chunk(2 << 20), chunk(2 << 20)}, "INVALID_UPLOAD", "chunk", codes.InvalidArgument, false},
		{"too few bytes", []*savepointv1.UploadCheckpointRequest{start(3 << 20), chunk(2 << 20)}, "INVALID_UPLOAD", "chunk", codes.InvalidArgument, false},
		{"data in the start", []*savepointv1.UploadCheckpointRequest{{Part: &savepointv1.UploadCheckpointRequest_Start{Start: &savepointv1.UploadCheckpointStart{
			Checkpoint: cp("t", "", "1", "", "{}", nil)}}}}, "INVALID_UPLOAD", "checkpoint.checkpoint.data", codes.InvalidArgument, false},
		{"over the upload limit", []*savepointv1.UploadCheckpointRequest{start(1<<30 + 1)}, "INVALID_UPLOAD", "blobs", codes.InvalidArgument, false},
		{"cancelled", []*savepointv1.UploadCheckpointRequest{start(8 << 20), chunk(3 << 20), chunk(3 << 20)}, "CANCELED", "", codes.Canceled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := e.Graph.UploadCheckpoint(cctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := st.Send(m); err != nil {
					break
				}
			}
			if tc.unclose {
				time.Sleep(200 * time.Millisecond) // let the server stage what was sent
				cancel()
				_, err = st.CloseAndRecv()
				if status.Code(err) != codes.Canceled {
					t.Fatalf("cancelled upload: %v", err)
				}
			} else {
				_, err = st.CloseAndRecv()
				wantReason(t, err, tc.code, tc.reason, tc.field)
			}
			// Nothing is visible and the staged chunks are removed (the
			// server removes them as the call ends, so allow it a moment).
			if tp := get(t, e, "t", "", ""); tp != nil {
				t.Fatalf("a failed upload is visible: %v", tp.Checkpoint)
			}
			deadline := time.Now().Add(5 * time.Second)
			for n := records(t, e); n != n0; n = records(t, e) {
				if time.Now().After(deadline) {
					t.Fatalf("%d records after a failed upload, want %d: staged chunks left behind", n, n0)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// An upload whose thread is deleted meanwhile is aborted.
	st, err := e.Graph.UploadCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, e, cp("t", "", "0", "", "{}", nil))
	for _, m := range []*savepointv1.UploadCheckpointRequest{start(4 << 20), chunk(2 << 20)} {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(chunk(2 << 20)); err != nil {
		t.Fatal(err)
	}
	_, err = st.CloseAndRecv()
	wantReason(t, err, codes.Aborted, "UPLOAD_ABORTED", "")
	if tp := get(t, e, "t", "", ""); tp != nil {
		t.Fatalf("an aborted upload is visible: %v", tp.Checkpoint)
	}
}

// testAtomicVisibility runs writers that put checkpoints whose every
// channel has a new blob, inline and uploaded, while readers read the
// latest checkpoint and list the thread: no reader may see a checkpoint
// without all of its blobs.
func testAtomicVisibility(t *testing.T, e *Env) {
	const writers, perWriter = 3, 12
	var done atomic.Bool
	var seen, bad atomic.Int64
	var firstBad atomic.Value
	checkTuple := func(tp *Tuple) {
		seen.Add(1)
		got := blobsOf(tp)
		for ch, v := range tp.Checkpoint.ChannelVersions {
			if _, ok := got[ch+"@"+v]; !ok {
				bad.Add(1)
				firstBad.CompareAndSwap(nil, fmt.Sprintf("%s/%s misses blob %s@%s", tp.Checkpoint.ThreadId, tp.Checkpoint.CheckpointId, ch, v))
			}
		}
	}
	var wg sync.WaitGroup
	var readErr atomic.Value
	for r := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := fmt.Sprintf("t%d", r)
			for !done.Load() {
				tp, err := Get(ctx, e.Graph, &savepointv1.GetCheckpointRequest{ThreadId: thread}, e.Budget)
				if err != nil {
					readErr.CompareAndSwap(nil, err)
					return
				}
				if tp != nil {
					checkTuple(tp)
				}
				ts, err := List(ctx, e.Graph, &savepointv1.ListCheckpointsRequest{ThreadId: thread, Limit: 3}, e.Budget)
				if err != nil {
					readErr.CompareAndSwap(nil, err)
					return
				}
				for _, tp := range ts {
					checkTuple(tp)
				}
			}
		}()
	}
	var ww sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			thread := fmt.Sprintf("t%d", w)
			for i := range perWriter {
				id := fmt.Sprintf("%04d", i)
				versions := map[string]string{}
				req := &savepointv1.PutCheckpointRequest{}
				for _, ch := range []string{"a", "b", "c"} {
					versions[ch] = id
					n := 100
					if i%3 == 2 {
						n = 700 << 10 // an upload of about 2 MiB in staged chunks
					}
					req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: ch, Version: id, Value: &savepointv1.TypedValue{Type: "bytes", Data: bigBlob(n, uint64(i))}})
				}
				req.Checkpoint = cp(thread, "", id, "", "{}", versions)
				var err error
				if i%3 == 2 {
					_, err = Upload(ctx, e.Graph, req, 256<<10)
				} else {
					_, err = e.Graph.PutCheckpoint(ctx, req)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	ww.Wait()
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if bad.Load() > 0 {
		t.Fatalf("%d of %d tuples read missed a blob; first: %v", bad.Load(), seen.Load(), firstBad.Load())
	}
	if seen.Load() == 0 {
		t.Fatal("the readers saw no checkpoint")
	}
	t.Logf("%d tuples read during the writes, none without its blobs", seen.Load())
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

func testRestart(t *testing.T, e *Env) {
	if e.Restart == nil {
		t.Skip("this environment cannot restart its daemon")
	}
	mustPut(t, e, cp("t", "", "1", "", `{"k":1}`, map[string]string{"a": "1"}), blob("a", "1", "A"))
	mustWrites(t, e, "t", "", "1", "task", "p", cw(0, "a", `"w"`), cw(-1, "__error__", `"e"`))
	before := get(t, e, "t", "", "")
	e = e.Restart(t)
	after := get(t, e, "t", "", "")
	if after == nil || !proto.Equal(before.Checkpoint, after.Checkpoint) || !mapsEqual(blobsOf(before), blobsOf(after)) ||
		!slices.Equal(writesOf(before), writesOf(after)) {
		t.Fatalf("after a restart:\n%v\nbefore:\n%v", after, before)
	}
}
