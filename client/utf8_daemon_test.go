package client_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// utf8Hole marks the string a case breaks; brokenUTF8 is the same bytes
// made invalid UTF-8, so the wire framing of a marshaled hole stays valid.
const utf8Hole = "#HOLE#"

var brokenUTF8 = string([]byte{'#', 'H', 0xff, 0xc0, 'E', '#'})

// TestDaemonInvalidUTF8: a request holding a string that is not UTF-8,
// which grpc-go cannot marshal, gets from the client the very status the
// daemon answers the same request's bytes with (INVALID_ARGUMENT,
// INVALID_UTF8, the field's path, the message), matches
// client.ErrInvalidArgument, and is never sent: no interceptor after the
// client's sees it and the session is unchanged.
func TestDaemonInvalidUTF8(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	var sent atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		sent.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c := dial(t, "unix:"+d.Socket, client.WithDialOptions(grpc.WithChainUnaryInterceptor(count)))
	ctx := t.Context()
	_, err := c.Start(ctx, "s", "task", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}

	save := func(edit func(r *savepointv1.SaveCheckpointRequest, bad string)) func(string) proto.Message {
		return func(bad string) proto.Message {
			r := &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 1, RequestId: "8a3c6b1e-6a0e-4c39-9d0c-6c1f9f4c2a11",
				AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `"a"`}, {Role: "user", ContentJson: `"b"`}},
				Labels:         map[string]string{"team": "red"}}
			edit(r, bad)
			return r
		}
	}
	tests := []struct {
		name   string
		method string
		req    func(bad string) proto.Message // the request with bad in place of one string
		field  string
	}{
		{"save: session_id", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.SessionId = bad }), "session_id"},
		{"save: second message's content_json", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) {
				r.AppendMessages[1].ContentJson = `"` + bad + `"`
			}),
			"append_messages[1].content_json"},
		{"save: first message's role", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.AppendMessages[0].Role = bad }), "append_messages[0].role"},
		{"save: pending tool use name", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) {
				r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "t1", Name: bad, EffectClass: client.SideEffect}}
			}), "pending_tool_uses[0].name"},
		{"save: state_json", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.StateJson = bad }), "state_json"},
		{"save: label value", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.Labels["team"] = bad }), "labels"},
		{"save: label key", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.Labels[bad] = "x" }), "labels"},
		{"save: of two, the first declared", savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
			save(func(r *savepointv1.SaveCheckpointRequest, bad string) { r.StateJson, r.Task = bad, bad }), "task"},
		{"begin: tool_use_id", savepointv1.SavepointService_BeginEffect_FullMethodName,
			func(bad string) proto.Message {
				return &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: bad, Epoch: 1}
			}, "tool_use_id"},
		{"record: output", savepointv1.SavepointService_RecordEffect_FullMethodName,
			func(bad string) proto.Message {
				return &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t1", Name: "write", Output: bad}
			}, "output"},
		{"record: name", savepointv1.SavepointService_RecordEffect_FullMethodName,
			func(bad string) proto.Message {
				return &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t1", Name: bad}
			}, "name"},
		{"resume: session_id", savepointv1.SavepointService_Resume_FullMethodName,
			func(bad string) proto.Message { return &savepointv1.ResumeRequest{SessionId: bad} }, "session_id"},
		{"list: label filter", savepointv1.SavepointService_ListSessions_FullMethodName,
			func(bad string) proto.Message {
				return &savepointv1.ListSessionsRequest{LabelFilter: map[string]string{"team": bad}}
			}, "label_filter"},
		{"complete: final_output", savepointv1.SavepointService_CompleteSession_FullMethodName,
			func(bad string) proto.Message {
				return &savepointv1.CompleteSessionRequest{SessionId: "s", Epoch: 1, Status: client.StatusCompleted, FinalOutput: bad}
			}, "final_output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The daemon's answer to the bytes the request would be.
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tt.req(utf8Hole))
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.ReplaceAll(b, []byte(utf8Hole), []byte(brokenUTF8))
			derr := d.Conn.Invoke(ctx, tt.method, &daemontest.RawFrame{B: b}, &daemontest.RawFrame{}, grpc.ForceCodec(daemontest.RawCodec{}))
			want := status.Convert(derr)
			if want.Code() != codes.InvalidArgument || info(want).GetReason() != "INVALID_UTF8" || info(want).GetMetadata()["field"] != tt.field {
				t.Fatalf("the daemon answered %v %v, want INVALID_UTF8 on %s (a broken case)", want.Code(), want.Proto(), tt.field)
			}

			before := sent.Load()
			err = invoke(ctx, c.Raw(), tt.req(brokenUTF8))
			e, ok := errors.AsType[*client.Error](err)
			if !ok || !errors.Is(err, client.ErrInvalidArgument) || e.Reason != "INVALID_UTF8" || e.Metadata["field"] != tt.field {
				t.Fatalf("the client returned %v, want ErrInvalidArgument with reason INVALID_UTF8 on %s", err, tt.field)
			}
			got := status.Convert(err)
			if got.Code() != want.Code() || got.Message() != want.Message() || !proto.Equal(info(got), info(want)) {
				t.Errorf("the client's status %v\nthe daemon's         %v", got.Proto(), want.Proto())
			}
			if n := sent.Load() - before; n != 0 {
				t.Errorf("the refused request went on to the transport %d times", n)
			}
		})
	}
	if sent.Load() == 0 {
		t.Fatal("the counting interceptor saw nothing, not even Start: it proves nothing")
	}

	// The session is as it was, and its next save builds on revision 1.
	r, err := c.Resume(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision() != 1 || len(r.Messages()) != 1 || r.Status() != client.StatusActive {
		t.Fatalf("after the refusals: revision %d, %d messages, status %v; want revision 1 unchanged", r.Revision(), len(r.Messages()), r.Status())
	}
	err = r.Save(ctx, client.SaveOptions{Append: []client.Message{{Role: "assistant", ContentJSON: `"` + brokenUTF8 + `"`}}})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Session.Save with invalid UTF-8: %v, want ErrInvalidArgument", err)
	}
	if err := r.Save(ctx, client.SaveOptions{Append: []client.Message{{Role: "assistant", ContentJSON: `"fixed"`}}}); err != nil || r.Revision() != 2 {
		t.Fatalf("the corrected save: %v, revision %d; want revision 2", err, r.Revision())
	}
}

// info returns st's ErrorInfo of the savepoint.v1 domain, or nil.
func info(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok && i.GetDomain() == client.Domain {
			return i
		}
	}
	return nil
}

// invoke calls the raw client's method for req.
func invoke(ctx context.Context, raw savepointv1.SavepointServiceClient, req proto.Message) error {
	var err error
	switch r := req.(type) {
	case *savepointv1.SaveCheckpointRequest:
		_, err = raw.SaveCheckpoint(ctx, r)
	case *savepointv1.BeginEffectRequest:
		_, err = raw.BeginEffect(ctx, r)
	case *savepointv1.RecordEffectRequest:
		_, err = raw.RecordEffect(ctx, r)
	case *savepointv1.ResumeRequest:
		_, err = raw.Resume(ctx, r)
	case *savepointv1.ListSessionsRequest:
		_, err = raw.ListSessions(ctx, r)
	case *savepointv1.CompleteSessionRequest:
		_, err = raw.CompleteSession(ctx, r)
	default:
		panic("invoke: no method for " + string(proto.MessageName(req)))
	}
	return err
}
