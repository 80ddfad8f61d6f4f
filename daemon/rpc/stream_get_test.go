package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon/rpc"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// getAnswers runs req as its own GetCheckpoint RPC on conn: each message
// it streams, then its error, if any.
func getAnswers(t *testing.T, conn *grpc.ClientConn, req *savepointv1.GetCheckpointRequest) []answer {
	t.Helper()
	st, err := savepointv1.NewGraphCheckpointServiceClient(conn).GetCheckpoint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []answer
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return append(out, answer{st: statusProto(t, err)})
		}
		clearTimes(m.ProtoReflect())
		out = append(out, answer{resp: m})
	}
}

// carriedAnswers sends req on cs as call id and reads its answers to the
// one without more. A stream of no message is one answer carrying nothing,
// returned as none.
func carriedAnswers(t *testing.T, cs savepointv1.CallStreamService_CallStreamClient, id uint64, req proto.Message) []answer {
	t.Helper()
	if err := cs.Send(envelope(t, id, req)); err != nil {
		t.Fatal(err)
	}
	var out []answer
	for {
		resp, err := cs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != id {
			t.Fatalf("answer to %d carries id %d", id, resp.GetId())
		}
		if resp.GetResponse() == nil {
			if resp.GetMore() || len(out) > 0 {
				t.Fatalf("an empty answer to %d after %d, more %v: only a stream of no message is answered so", id, len(out), resp.GetMore())
			}
			return nil
		}
		out = append(out, streamAnswer(t, resp))
		if resp.GetError() != nil && resp.GetMore() {
			t.Fatalf("an error answer to %d with more set", id)
		}
		if !resp.GetMore() {
			return out
		}
	}
}

// TestCallStreamGetCheckpoint: GetCheckpoint carried on a CallStream
// answers with the same messages, in the same order, as its own RPC, more
// set on all but the last: a checkpoint too large for one message, the
// latest, one not found (no message), a refused request.
func TestCallStreamGetCheckpoint(t *testing.T) {
	big := func(id string) *savepointv1.PutCheckpointRequest {
		cp := &savepointv1.GraphCheckpoint{ThreadId: "th", CheckpointId: id, Checkpoint: &savepointv1.TypedValue{Type: "json", Data: []byte(`{}`)},
			MetadataJson: `{}`, ChannelVersions: map[string]string{}}
		var blobs []*savepointv1.ChannelBlob
		for i := range 3 {
			ch := fmt.Sprintf("ch%d", i)
			cp.ChannelVersions[ch] = "1"
			blobs = append(blobs, &savepointv1.ChannelBlob{Channel: ch, Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: []byte(strings.Repeat(ch, 6<<10))}})
		}
		return &savepointv1.PutCheckpointRequest{Checkpoint: cp, Blobs: blobs}
	}
	steps := []proto.Message{
		big("c1"),
		big("c2"),
		&savepointv1.GetCheckpointRequest{ThreadId: "th", CheckpointId: "c1"},
		&savepointv1.GetCheckpointRequest{ThreadId: "th"},
		&savepointv1.GetCheckpointRequest{ThreadId: "th", CheckpointId: "missing"},
		&savepointv1.GetCheckpointRequest{ThreadId: ""},
	}
	unary := serve(t, memStore(t), nil, 4)
	streamed := serve(t, memStore(t), nil, 4)
	cs, _ := openStream(t, streamed)
	var most int
	var refused, empty bool
	for i, req := range steps {
		var want, got []answer
		if get, ok := req.(*savepointv1.GetCheckpointRequest); ok {
			want, got = getAnswers(t, unary, get), carriedAnswers(t, cs, uint64(i+1), req)
		} else {
			want, got = []answer{unaryAnswer(t, unary, req)}, []answer{call(t, cs, uint64(i+1), req)}
		}
		if len(got) != len(want) {
			t.Fatalf("step %d %v: %d answers carried, %d streamed:\n%v\n%v", i, req, len(got), len(want), got, want)
		}
		for j := range want {
			if !got[j].equal(want[j]) {
				t.Errorf("step %d %v, message %d:\nstream %v\nown RPC %v", i, req, j, got[j], want[j])
			}
			refused = refused || want[j].st != nil
		}
		most, empty = max(most, len(want)), empty || len(want) == 0
	}
	// The steps must reach what they say they reach, or they compare little.
	if most < 2 || !refused || !empty {
		t.Fatalf("most messages in one answer %d (want 2 or more), a refusal %v, an empty stream %v", most, refused, empty)
	}
}

// TestCallStreamGetCheckpointInterceptor: a carried GetCheckpoint runs the
// stream interceptor with its own RPC's name, not the unary one, and a
// refusal there answers that call alone.
func TestCallStreamGetCheckpointInterceptor(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	sic := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod == savepointv1.CallStreamService_CallStream_FullMethodName { // the stream itself, as the server's own
			return handler(srv, ss)
		}
		mu.Lock()
		seen = append(seen, info.FullMethod)
		n := len(seen)
		mu.Unlock()
		if n == 2 {
			return rpc.ToStatus(rpc.ErrPermissionDenied).Err()
		}
		return handler(srv, ss)
	}
	cs, _ := openStream(t, serveWith(t, memStore(t), rpc.StreamOptions{MaxInFlight: 4, StreamInterceptor: sic}))
	if got := carriedAnswers(t, cs, 1, &savepointv1.GetCheckpointRequest{ThreadId: "th"}); len(got) != 0 {
		t.Fatalf("get of nothing: %v", got)
	}
	got := carriedAnswers(t, cs, 2, &savepointv1.GetCheckpointRequest{ThreadId: "th"})
	if len(got) != 1 {
		t.Fatalf("denied get: %v", got)
	}
	if code, reason := reasonOf(t, got[0]); code != codes.PermissionDenied || reason != "PERMISSION_DENIED" {
		t.Fatalf("denied get: %v %s", code, reason)
	}
	if code, _ := reasonOf(t, call(t, cs, 3, save("s"))); code != codes.OK {
		t.Fatalf("the next call: %v", code)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{savepointv1.GraphCheckpointService_GetCheckpoint_FullMethodName, savepointv1.GraphCheckpointService_GetCheckpoint_FullMethodName}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("stream interceptor saw %v, want %v", seen, want)
	}
}

// statusProto is err's status, which must be one.
func statusProto(t *testing.T, err error) *spb.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status", err)
	}
	return st.Proto()
}

// TestServerInfoCallStreamGetCheckpoint: GetServerInfo says GetCheckpoint
// is carried exactly when the daemon serves CallStream.
func TestServerInfoCallStreamGetCheckpoint(t *testing.T) {
	for _, inFlight := range []int{0, 4} {
		info, err := savepointv1.NewSavepointServiceClient(serve(t, memStore(t), nil, inFlight)).GetServerInfo(context.Background(), &savepointv1.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := info.GetCallStreamGetCheckpoint(); got != (inFlight > 0) || int(info.GetCallStreamMaxInFlight()) != inFlight {
			t.Errorf("in flight %d: call_stream_get_checkpoint %v, call_stream_max_in_flight %d", inFlight, got, info.GetCallStreamMaxInFlight())
		}
	}
}
