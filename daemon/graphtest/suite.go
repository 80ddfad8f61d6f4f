package graphtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// Run runs the suite, each test as a parallel subtest (each waits on its
// own daemon's syncs, so they overlap even on two cores); newEnv starts an
// empty daemon that the test owns, and must be safe to call from parallel
// subtests.
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
		{"ListThreads", testListThreads},
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
		{"UploadWrites", testUploadWrites},
		{"AtomicVisibility", testAtomicVisibility},
		{"BigDelete", testBigDelete},
		{"Restart", testRestart},
		{"ThreadEffectSideEffect", testThreadEffectSideEffect},
		{"ThreadEffectAttempts", testThreadEffectAttempts},
		{"ThreadEffectKeys", testThreadEffectKeys},
		{"ThreadEffectRequestID", testThreadEffectRequestID},
		{"ThreadEffectList", testThreadEffectList},
		{"ThreadEffectLifecycle", testThreadEffectLifecycle},
		{"ThreadEffectBadInput", testThreadEffectBadInput},
		{"ThreadEffectResolveDone", testThreadEffectResolveDone},
		{"ThreadEffectResolveNotDone", testThreadEffectResolveNotDone},
		{"ThreadEffectResolveRefused", testThreadEffectResolveRefused},
		{"ThreadEffectApproveOnce", testThreadEffectApproveOnce},
		{"ThreadEffectApproveDeny", testThreadEffectApproveDeny},
		{"ThreadEffectApproveRefused", testThreadEffectApproveRefused},
		{"ThreadEffectHistory", testThreadEffectHistory},
		{"ThreadEffectDuplicate", testThreadEffectDuplicate},
		{"ThreadEffectDuplicateWindow", testThreadEffectDuplicateWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t))
		})
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
