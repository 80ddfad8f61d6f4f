package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

const maxRequestBytes = 64 << 10

// serve starts the three services over store on a Unix socket in a
// temporary directory, with the request codec and ic (nil for none) as
// the unary interceptor, and returns a connection to them.
func serve(t testing.TB, store core.Store, ic grpc.UnaryServerInterceptor, maxInFlight int) *grpc.ClientConn {
	t.Helper()
	return serveWith(t, store, rpc.StreamOptions{MaxInFlight: maxInFlight, Interceptor: ic})
}

// serveWith is serve with the stream server's options, whose interceptors
// the server's own calls pass too.
func serveWith(t testing.TB, store core.Store, so rpc.StreamOptions) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	opts := rpc.Options{Limits: rpc.Limits{MaxRequestBytes: maxRequestBytes, MaxMessageBytes: 16 << 10, MaxStateBytes: 16 << 10, ResponseBudgetBytes: 32 << 10},
		CallStreamMaxInFlight: so.MaxInFlight}
	sopts := []grpc.ServerOption{}
	if so.Interceptor != nil {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(so.Interceptor))
	}
	if so.StreamInterceptor != nil {
		sopts = append(sopts, grpc.ChainStreamInterceptor(so.StreamInterceptor))
	}
	srv := grpc.NewServer(append(sopts, rpc.CodecOptions(maxRequestBytes)...)...)
	api := rpc.NewServer(store, opts)
	savepointv1.RegisterSavepointServiceServer(srv, api)
	var graph savepointv1.GraphCheckpointServiceServer
	if gs, ok := store.(core.GraphStore); ok {
		graph = rpc.NewGraphServer(gs, opts)
		savepointv1.RegisterGraphCheckpointServiceServer(srv, graph)
	}
	savepointv1.RegisterCallStreamServiceServer(srv, rpc.NewStreamServer(api, graph, so))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func memStore(t testing.TB) *badgerstore.Store {
	t.Helper()
	s, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// unaryMethod is the full name and response type of the unary RPC that
// takes req.
func unaryMethod(t testing.TB, req proto.Message) (string, proto.Message) {
	t.Helper()
	for _, fd := range []protoreflect.FileDescriptor{savepointv1.File_savepoint_v1_savepoint_proto, savepointv1.File_savepoint_v1_graph_proto} {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				if m.Input().FullName() == req.ProtoReflect().Descriptor().FullName() && !m.IsStreamingClient() && !m.IsStreamingServer() {
					mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
					if err != nil {
						t.Fatal(err)
					}
					return "/" + string(svc.FullName()) + "/" + string(m.Name()), mt.New().Interface()
				}
			}
		}
	}
	t.Fatalf("no unary RPC takes %s", req.ProtoReflect().Descriptor().FullName())
	return "", nil
}

// envelope is req in a CallStreamRequest.
func envelope(t testing.TB, id uint64, req proto.Message) *savepointv1.CallStreamRequest {
	t.Helper()
	env := &savepointv1.CallStreamRequest{Id: id}
	oneof := env.ProtoReflect().Descriptor().Oneofs().ByName("request")
	for i := range oneof.Fields().Len() {
		f := oneof.Fields().Get(i)
		if f.Message().FullName() == req.ProtoReflect().Descriptor().FullName() {
			env.ProtoReflect().Set(f, protoreflect.ValueOfMessage(req.ProtoReflect()))
			return env
		}
	}
	t.Fatalf("CallStreamRequest carries no %s", req.ProtoReflect().Descriptor().FullName())
	return nil
}

// answer is a call's outcome in comparable form: the response with its
// times cleared, or the error's code, message and ErrorInfo.
type answer struct {
	resp proto.Message
	st   *spb.Status
}

func (a answer) String() string {
	if a.st != nil {
		return "error " + a.st.String()
	}
	return string(a.resp.ProtoReflect().Descriptor().Name()) + "{" + a.resp.(interface{ String() string }).String() + "}"
}

func (a answer) equal(b answer) bool {
	if (a.st == nil) != (b.st == nil) {
		return false
	}
	if a.st != nil {
		// Each detail unpacked: an Any's bytes hold a map in no set order.
		sa, sb := status.FromProto(a.st), status.FromProto(b.st)
		da, db := sa.Details(), sb.Details()
		if sa.Code() != sb.Code() || sa.Message() != sb.Message() || len(da) != len(db) {
			return false
		}
		for i := range da {
			ma, oka := da[i].(proto.Message)
			mb, okb := db[i].(proto.Message)
			if !oka || !okb || !proto.Equal(ma, mb) {
				return false
			}
		}
		return true
	}
	return proto.Equal(a.resp, b.resp)
}

// clearTimes zeroes what differs from store to store in m: every
// Timestamp and Duration, idempotency keys (random), and GetServerInfo's
// pid and store size.
func clearTimes(m protoreflect.Message) {
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case f.Message() == nil:
		case f.Message().FullName() == "google.protobuf.Timestamp" || f.Message().FullName() == "google.protobuf.Duration":
			m.Clear(f)
		case f.IsList():
			for i := range v.List().Len() {
				clearTimes(v.List().Get(i).Message())
			}
		case f.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if f.MapValue().Message() != nil {
					clearTimes(mv.Message())
				}
				return true
			})
		default:
			clearTimes(v.Message())
		}
		return true
	})
	if f := m.Descriptor().Fields().ByName("idempotency_key"); f != nil { // random per store
		m.Clear(f)
	}
	if info, ok := m.Interface().(*savepointv1.GetServerInfoResponse); ok {
		info.Pid, info.StoreBytes = 0, nil
	}
}

func unaryAnswer(t *testing.T, conn *grpc.ClientConn, req proto.Message) answer {
	t.Helper()
	method, resp := unaryMethod(t, req)
	if err := conn.Invoke(context.Background(), method, req, resp); err != nil {
		st, ok := status.FromError(err)
		if !ok {
			t.Fatalf("%s: %v is not a status", method, err)
		}
		return answer{st: st.Proto()}
	}
	clearTimes(resp.ProtoReflect())
	return answer{resp: resp}
}

func streamAnswer(t *testing.T, resp *savepointv1.CallStreamResponse) answer {
	t.Helper()
	if b := resp.GetError(); b != nil {
		st := new(spb.Status)
		if err := proto.Unmarshal(b, st); err != nil {
			t.Fatal(err)
		}
		return answer{st: st}
	}
	m := resp.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("response"))
	if f == nil {
		t.Fatalf("answer %d carries nothing", resp.GetId())
	}
	out := m.Get(f).Message().Interface()
	clearTimes(out.ProtoReflect())
	return answer{resp: out}
}

func openStream(t testing.TB, conn *grpc.ClientConn) (savepointv1.CallStreamService_CallStreamClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs, err := savepointv1.NewCallStreamServiceClient(conn).CallStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cancel
}

// call sends req on cs and waits for its answer, which must carry id.
func call(t *testing.T, cs savepointv1.CallStreamService_CallStreamClient, id uint64, req proto.Message) answer {
	t.Helper()
	if err := cs.Send(envelope(t, id, req)); err != nil {
		t.Fatal(err)
	}
	resp, err := cs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != id {
		t.Fatalf("answer to %d carries id %d", id, resp.GetId())
	}
	return streamAnswer(t, resp)
}

func msg(role, content string) *savepointv1.Message {
	return &savepointv1.Message{Role: role, ContentJson: content}
}

// script is a session's and a graph thread's life, with a request for each
// reason the two services return that a request can reach: run it against
// two fresh stores, one unary and one over CallStream, and each answer must
// be the same.
func script() []proto.Message {
	tu := &savepointv1.ToolUse{ToolUseId: "t1", Name: "pay", InputJson: `{}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT}
	ro := &savepointv1.ToolUse{ToolUseId: "t2", Name: "read", InputJson: `{}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY}
	gcp := func(id string) *savepointv1.GraphCheckpoint {
		return &savepointv1.GraphCheckpoint{ThreadId: "th", CheckpointId: id, Checkpoint: &savepointv1.TypedValue{Type: "json", Data: []byte(`{}`)}, MetadataJson: `{}`}
	}
	return []proto.Message{
		&savepointv1.SaveCheckpointRequest{SessionId: ""},                                                                                             // INVALID_SESSION_ID
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", AppendMessages: []*savepointv1.Message{msg("user", "{not json")}},                         // INVALID_JSON
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", AppendMessages: []*savepointv1.Message{msg("user", `"`+strings.Repeat("x", 20<<10)+`"`)}}, // MESSAGE_TOO_LARGE
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", StateJson: `"` + strings.Repeat("x", 80<<10) + `"`},                                       // REQUEST_TOO_LARGE
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", RequestId: "not a uuid"},                                                                  // INVALID_REQUEST_ID
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", RequestId: "7f1c8a3e-4b9d-4c1e-9a2f-0e6b5d4c3b2a", AppendMessages: []*savepointv1.Message{msg("user", `"hi"`)}},
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", RequestId: "7f1c8a3e-4b9d-4c1e-9a2f-0e6b5d4c3b2a", AppendMessages: []*savepointv1.Message{msg("user", `"hi"`)}},    // replayed
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", RequestId: "7f1c8a3e-4b9d-4c1e-9a2f-0e6b5d4c3b2a", AppendMessages: []*savepointv1.Message{msg("user", `"other"`)}}, // REQUEST_ID_REUSED
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", ExpectedRevision: 7},                                                                                               // REVISION_MISMATCH
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", ExpectedRevision: 1, Epoch: 1, AppendMessages: []*savepointv1.Message{msg("assistant", `"x"`)}, PendingToolUses: []*savepointv1.ToolUse{tu, ro}},
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", ExpectedRevision: 2, Epoch: 1, KeepMessages: proto.Uint64(9)}, // KEEP_MESSAGES_OUT_OF_RANGE
		&savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "nope", Epoch: 1},                                     // CALL_NOT_PENDING
		&savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "t1"},
		&savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "t1", Epoch: 1}, // again: already begun
		&savepointv1.RecordEffectRequest{SessionId: "s1", ToolUseId: "t1", Name: "other", Output: "ok"},
		&savepointv1.RecordEffectRequest{SessionId: "s1", ToolUseId: "t1", Name: "pay", Output: "ok"},
		&savepointv1.RecordEffectRequest{SessionId: "s1", ToolUseId: "t1", Name: "pay", Output: "different"}, // EFFECT_CONFLICT
		&savepointv1.ReconcileRequest{SessionId: "s1"},
		&savepointv1.ResumeRequest{SessionId: "s1"},
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", ExpectedRevision: 2, Epoch: 1}, // SESSION_FENCED
		&savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "t2", Epoch: 1},        // SESSION_FENCED
		&savepointv1.GetSessionRequest{SessionId: "s1"},
		&savepointv1.GetSessionRequest{SessionId: "s1", Revision: proto.Uint64(9)}, // REVISION_NOT_FOUND
		&savepointv1.GetSessionRequest{SessionId: "missing"},                       // SESSION_NOT_FOUND
		&savepointv1.ListMessagesRequest{SessionId: "s1", PageToken: "garbage"},
		&savepointv1.ListSessionsRequest{PageSize: -1}, // INVALID_PAGE_SIZE
		&savepointv1.ListSessionsRequest{},
		&savepointv1.ListEffectsRequest{SessionId: "s1"},
		&savepointv1.CompleteSessionRequest{SessionId: "s1", Epoch: 2, Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED, FinalOutput: "done"},
		&savepointv1.SaveCheckpointRequest{SessionId: "s1", ExpectedRevision: 2, Epoch: 2}, // SESSION_COMPLETED
		&savepointv1.ForkSessionRequest{SourceSessionId: "s1", NewSessionId: "s1"},         // SESSION_EXISTS
		&savepointv1.ForkSessionRequest{SourceSessionId: "s1", NewSessionId: "s2", Revision: 1},
		&savepointv1.ForkSessionRequest{SourceSessionId: "s1", NewSessionId: "s2", Revision: 1}, // SESSION_EXISTS
		&savepointv1.DeleteSessionRequest{SessionId: "s2"},
		&savepointv1.GetServerInfoRequest{},
		&savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: ""}}, // INVALID_GRAPH_KEY
		&savepointv1.PutCheckpointRequest{Checkpoint: gcp("c1")},
		&savepointv1.PutWritesRequest{ThreadId: "th", CheckpointId: "c1", TaskId: "task", Writes: []*savepointv1.ChannelWrite{{Channel: "a", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`)}}}},
		&savepointv1.BeginThreadEffectRequest{ThreadId: "th", ToolUseId: "g1", Name: "pay", InputJson: `{}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT},
		&savepointv1.RecordThreadEffectRequest{ThreadId: "th", ToolUseId: "g1", Attempt: 1, Output: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`)}},
		&savepointv1.RecordThreadEffectRequest{ThreadId: "th", ToolUseId: "g1", Attempt: 1, Output: &savepointv1.TypedValue{Type: "json", Data: []byte(`2`)}}, // EFFECT_CONFLICT
		&savepointv1.ListThreadEffectsRequest{ThreadId: "th"},
		&savepointv1.ListThreadsRequest{},
		&savepointv1.CopyThreadRequest{SourceThreadId: "th", TargetThreadId: "th2"},
		&savepointv1.PruneRequest{ThreadIds: []string{"th2"}}, // MISSING_FIELD (strategy)
		&savepointv1.DeleteThreadRequest{ThreadId: "th2"},
		&savepointv1.DeleteForRunsRequest{RunIds: []string{"r"}},
	}
}

// TestCallStreamSameAsUnary runs the script unary against one store and
// over one CallStream against another: every answer, error code, message
// and ErrorInfo included, is the same.
func TestCallStreamSameAsUnary(t *testing.T) {
	unary := serve(t, memStore(t), nil, 4)
	streamed := serve(t, memStore(t), nil, 4)
	cs, _ := openStream(t, streamed)
	reasons := map[string]bool{}
	for i, req := range script() {
		want := unaryAnswer(t, unary, req)
		got := call(t, cs, uint64(i+1), req)
		if testing.Verbose() {
			t.Logf("step %d %T: %v", i, req, want)
		}
		if !got.equal(want) {
			t.Errorf("step %d %T:\nstream %v\nunary  %v", i, req, got, want)
		}
		if want.st != nil {
			for _, d := range status.FromProto(want.st).Details() {
				if ei, ok := d.(*errdetails.ErrorInfo); ok {
					reasons[ei.GetReason()] = true
				}
			}
		}
	}
	// The script must reach what it says it reaches, or it compares little.
	for _, r := range []string{"INVALID_SESSION_ID", "INVALID_JSON", "MESSAGE_TOO_LARGE", "REQUEST_TOO_LARGE", "INVALID_REQUEST_ID",
		"REQUEST_ID_REUSED", "REVISION_MISMATCH", "KEEP_MESSAGES_OUT_OF_RANGE", "CALL_NOT_PENDING", "EFFECT_CONFLICT", "SESSION_FENCED",
		"REVISION_NOT_FOUND", "SESSION_NOT_FOUND", "INVALID_PAGE_TOKEN", "INVALID_PAGE_SIZE", "SESSION_COMPLETED", "SESSION_EXISTS",
		"INVALID_GRAPH_KEY", "MISSING_FIELD", "TOOL_NAME_MISMATCH"} {
		if !reasons[r] {
			t.Errorf("the script never reached %s (reached %v)", r, reasons)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Recv(); err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

// hookStore is a store whose SaveCheckpoint runs hook first.
type hookStore struct {
	core.Store
	hook func(ctx context.Context, req *core.SaveRequest)
}

func (h *hookStore) SaveCheckpoint(ctx context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	h.hook(ctx, req)
	if err := ctx.Err(); err != nil {
		return core.SaveResult{}, err
	}
	return h.Store.SaveCheckpoint(ctx, req)
}

func save(id string) *savepointv1.SaveCheckpointRequest {
	return &savepointv1.SaveCheckpointRequest{SessionId: id}
}

func reasonOf(t *testing.T, a answer) (codes.Code, string) {
	t.Helper()
	if a.st == nil {
		return codes.OK, ""
	}
	st := status.FromProto(a.st)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), ei.GetReason()
		}
	}
	return st.Code(), ""
}

// TestCallStreamEmptyRequest: a call that carries no request is answered
// INVALID_ARGUMENT, MISSING_FIELD, and the stream goes on.
func TestCallStreamEmptyRequest(t *testing.T) {
	cs, _ := openStream(t, serve(t, memStore(t), nil, 4))
	if err := cs.Send(&savepointv1.CallStreamRequest{Id: 5}); err != nil {
		t.Fatal(err)
	}
	resp, err := cs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if code, reason := reasonOf(t, streamAnswer(t, resp)); resp.GetId() != 5 || code != codes.InvalidArgument || reason != "MISSING_FIELD" {
		t.Fatalf("id %d: %v %s, want 5: InvalidArgument MISSING_FIELD", resp.GetId(), code, reason)
	}
	if code, _ := reasonOf(t, call(t, cs, 6, save("after"))); code != codes.OK {
		t.Fatalf("the next call: %v", code)
	}
}

// TestCallStreamPanic: a handler's panic answers its call INTERNAL and
// leaves the stream serving the next calls.
func TestCallStreamPanic(t *testing.T) {
	store := &hookStore{Store: memStore(t), hook: func(_ context.Context, req *core.SaveRequest) {
		if req.SessionID == "boom" {
			panic("bug")
		}
	}}
	cs, _ := openStream(t, serve(t, store, nil, 4))
	if code, reason := reasonOf(t, call(t, cs, 1, save("boom"))); code != codes.Internal || reason != "INTERNAL" {
		t.Fatalf("panicking call: %v %s, want Internal INTERNAL", code, reason)
	}
	if code, _ := reasonOf(t, call(t, cs, 2, save("fine"))); code != codes.OK {
		t.Fatalf("the call after the panic: %v", code)
	}
}

// TestCallStreamInterceptor: the unary interceptor runs for each carried
// call with its unary RPC's name, and its refusal answers that call alone.
func TestCallStreamInterceptor(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ic := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen = append(seen, info.FullMethod)
		mu.Unlock()
		if info.FullMethod == savepointv1.SavepointService_DeleteSession_FullMethodName {
			return nil, rpc.ToStatus(rpc.ErrPermissionDenied).Err()
		}
		return handler(ctx, req)
	}
	cs, _ := openStream(t, serve(t, memStore(t), ic, 4))
	if code, _ := reasonOf(t, call(t, cs, 1, save("s"))); code != codes.OK {
		t.Fatalf("save: %v", code)
	}
	if code, reason := reasonOf(t, call(t, cs, 2, &savepointv1.DeleteSessionRequest{SessionId: "s"})); code != codes.PermissionDenied || reason != "PERMISSION_DENIED" {
		t.Fatalf("denied delete: %v %s", code, reason)
	}
	if code, _ := reasonOf(t, call(t, cs, 3, &savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "th", CheckpointId: "c", Checkpoint: &savepointv1.TypedValue{Type: "json", Data: []byte("1")}, MetadataJson: "{}"}})); code != codes.OK {
		t.Fatalf("put: %v", code)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{savepointv1.SavepointService_SaveCheckpoint_FullMethodName, savepointv1.SavepointService_DeleteSession_FullMethodName,
		savepointv1.GraphCheckpointService_PutCheckpoint_FullMethodName}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("interceptor saw %v, want %v", seen, want)
	}
}

// TestCallStreamBackpressure: with MaxInFlight 2, a client that sends ten
// calls while the store is stuck has two of them running and the rest
// unread; once the store goes on, all ten are answered, each by its id, a
// later call first when an earlier one is slower.
func TestCallStreamBackpressure(t *testing.T) {
	release := make(chan struct{})
	var running, peak, entered atomic.Int32
	store := &hookStore{Store: memStore(t), hook: func(ctx context.Context, req *core.SaveRequest) {
		entered.Add(1)
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if req.SessionID != "fast" {
			<-release
		}
		running.Add(-1)
	}}
	cs, _ := openStream(t, serve(t, store, nil, 2))
	for i := range 10 {
		if err := cs.Send(envelope(t, uint64(i+1), save("slow-"+string(rune('a'+i))))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // time to read more, were it not held back
	if n := entered.Load(); n != 2 {
		t.Fatalf("%d calls started while 2 were stuck, want 2", n)
	}
	close(release)
	ids := map[uint64]bool{}
	for range 10 {
		resp, err := cs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := reasonOf(t, streamAnswer(t, resp)); code != codes.OK {
			t.Fatalf("call %d: %v", resp.GetId(), code)
		}
		ids[resp.GetId()] = true
	}
	if len(ids) != 10 || peak.Load() > 2 {
		t.Fatalf("answered ids %v, peak running %d", ids, peak.Load())
	}

	// Matched by id: a slow call and a fast one after it.
	block := make(chan struct{})
	release2 := block
	store.hook = func(ctx context.Context, req *core.SaveRequest) {
		if req.SessionID == "slow2" {
			<-release2
		}
	}
	if err := cs.Send(envelope(t, 100, save("slow2"))); err != nil {
		t.Fatal(err)
	}
	if err := cs.Send(envelope(t, 101, save("fast"))); err != nil {
		t.Fatal(err)
	}
	first, err := cs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	close(block)
	second, err := cs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.GetId() != 101 || second.GetId() != 100 {
		t.Fatalf("answers came as %d then %d, want 101 then 100", first.GetId(), second.GetId())
	}
}

// TestCallStreamCancel: cancelling the stream cancels the calls it runs.
func TestCallStreamCancel(t *testing.T) {
	started, done := make(chan struct{}), make(chan error, 1)
	store := &hookStore{Store: memStore(t), hook: func(ctx context.Context, req *core.SaveRequest) {
		close(started)
		<-ctx.Done()
		done <- ctx.Err()
	}}
	cs, cancel := openStream(t, serve(t, store, nil, 4))
	if err := cs.Send(envelope(t, 1, save("s"))); err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the running call's context was not cancelled")
	}
	if _, err := cs.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v", err)
	}
}

// BenchmarkCallStream compares one call's round trip unary and on a
// CallStream, one call at a time (a client that waits for each answer),
// over a Unix socket to an in-memory store: GetSession, a read whose cost
// is mostly the transport's, and SaveCheckpoint. ns/op is per call.
func BenchmarkCallStream(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  func(i int) proto.Message
	}{
		{"GetSession", func(int) proto.Message { return &savepointv1.GetSessionRequest{SessionId: "bench"} }},
		{"SaveCheckpoint", func(i int) proto.Message {
			return &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprintf("bench-%d", i)}
		}},
	} {
		for _, mode := range []string{"unary", "stream"} {
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				store := memStore(b)
				conn := serve(b, store, nil, rpc.DefaultCallStreamMaxInFlight)
				if _, err := store.SaveCheckpoint(context.Background(), &core.SaveRequest{SessionID: "bench"}); err != nil {
					b.Fatal(err)
				}
				method, resp := unaryMethod(b, tc.req(0))
				var cs savepointv1.CallStreamService_CallStreamClient
				if mode == "stream" {
					cs, _ = openStream(b, conn)
				}
				i := 0
				for b.Loop() {
					i++
					req := tc.req(i)
					if mode == "unary" {
						if err := conn.Invoke(context.Background(), method, req, resp); err != nil {
							b.Fatal(err)
						}
						continue
					}
					if err := cs.Send(envelope(b, uint64(i), req)); err != nil {
						b.Fatal(err)
					}
					if got, err := cs.Recv(); err != nil || got.GetError() != nil {
						b.Fatal(err, got.GetError())
					}
				}
			})
		}
	}
}
