package client

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// notUTF8 is a string gRPC cannot marshal into a proto3 string field.
const notUTF8 = "a\xff\xc0b"

const (
	msgString   = "is not valid UTF-8; a string field must be, so send other data base64-encoded"
	msgMapKey   = "has a key that is not valid UTF-8; a string must be"
	msgMapValue = "is not valid UTF-8; a string must be"
)

// TestRefuseInvalidUTF8 checks the refusal's path and message, which follow
// the daemon's (TestDaemonInvalidUTF8 compares the two on the wire), and
// its shape: INVALID_ARGUMENT, INVALID_UTF8, metadata "field", unsent.
func TestRefuseInvalidUTF8(t *testing.T) {
	tests := []struct {
		name  string
		req   proto.Message
		field string // "": the request is valid
		msg   string
	}{
		{"valid save", &savepointv1.SaveCheckpointRequest{SessionId: "s", Labels: map[string]string{"k": "v"},
			AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"héllo"`}}}, "", ""},
		{"not a proto message", nil, "", ""},
		{"session_id", &savepointv1.SaveCheckpointRequest{SessionId: notUTF8}, "session_id", msgString},
		{"second message's role", &savepointv1.SaveCheckpointRequest{SessionId: "s", AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `"a"`}, {Role: notUTF8, ContentJson: `"b"`}}}, "append_messages[1].role", msgString},
		{"content_json", &savepointv1.SaveCheckpointRequest{SessionId: "s", AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `"` + notUTF8 + `"`}}}, "append_messages[0].content_json", msgString},
		{"pending tool use name", &savepointv1.SaveCheckpointRequest{SessionId: "s", PendingToolUses: []*savepointv1.ToolUse{
			{ToolUseId: "t1", Name: "ok"}, {ToolUseId: "t2", Name: notUTF8}}}, "pending_tool_uses[1].name", msgString},
		{"state_json", &savepointv1.SaveCheckpointRequest{SessionId: "s", StateJson: notUTF8}, "state_json", msgString},
		{"first declared of two, not first sent", &savepointv1.SaveCheckpointRequest{StateJson: notUTF8,
			AppendMessages: []*savepointv1.Message{{Role: notUTF8}}}, "append_messages[0].role", msgString},
		{"label value", &savepointv1.SaveCheckpointRequest{SessionId: "s", Labels: map[string]string{"team": notUTF8}},
			"labels", `value of key "team" ` + msgMapValue},
		{"label key", &savepointv1.SaveCheckpointRequest{SessionId: "s", Labels: map[string]string{notUTF8: "x"}}, "labels", msgMapKey},
		{"of two bad labels, the first key", &savepointv1.SaveCheckpointRequest{SessionId: "s",
			Labels: map[string]string{"b": notUTF8, "a": notUTF8, "c": "ok"}}, "labels", `value of key "a" ` + msgMapValue},
		{"long label key is cut", &savepointv1.SaveCheckpointRequest{SessionId: "s",
			Labels: map[string]string{strings.Repeat("é", 40): notUTF8}}, "labels", `value of key "` + strings.Repeat("é", 32) + `"... ` + msgMapValue},
		{"begin tool_use_id", &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: notUTF8}, "tool_use_id", msgString},
		{"record output", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t", Name: "n", Output: notUTF8}, "output", msgString},
		{"list filter", &savepointv1.ListSessionsRequest{LabelFilter: map[string]string{"k": notUTF8}}, "label_filter", `value of key "k" ` + msgMapValue},
		{"graph: inside a oneof and a nested message", &savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Start{
			Start: &savepointv1.UploadCheckpointStart{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "t", CheckpointId: notUTF8}}}},
			"start.checkpoint.checkpoint_id", msgString},
		{"graph: optional field", &savepointv1.ListCheckpointsRequest{ThreadId: "t", CheckpointNs: new(notUTF8)}, "checkpoint_ns", msgString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req any = tt.req
			if tt.req == nil {
				req = "not a message"
			}
			err := refuseInvalidUTF8(req)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused a valid request: %v", err)
				}
				return
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("err = %v (%T), want an *Error", err, err)
			}
			if !errors.Is(err, ErrInvalidArgument) || status.Code(err) != codes.InvalidArgument || e.Code != codes.InvalidArgument {
				t.Errorf("err = %v, code %v: want ErrInvalidArgument, INVALID_ARGUMENT", err, status.Code(err))
			}
			if e.Reason != "INVALID_UTF8" || e.Metadata["field"] != tt.field || len(e.Metadata) != 1 {
				t.Errorf("reason %q, metadata %v; want INVALID_UTF8, field %q", e.Reason, e.Metadata, tt.field)
			}
			if want := tt.field + ": " + tt.msg; e.Message != want {
				t.Errorf("message %q, want %q", e.Message, want)
			}
			if !unsent(err) || outcomeUnknown(err) {
				t.Errorf("unsent %v, outcome unknown %v; want a definite refusal never sent", unsent(err), outcomeUnknown(err))
			}
		})
	}
}

// A save refused for invalid UTF-8 is never sent and does not make the
// session forget an earlier save whose outcome is unknown: tried again, that
// one still carries its request_id, so the daemon applies it once; and the
// session goes on.
func TestSaveRefusedInvalidUTF8(t *testing.T) {
	bad := []struct {
		name string
		op   func(ctx context.Context, s *Session) error
	}{
		{"content_json", func(ctx context.Context, s *Session) error {
			return s.Save(ctx, SaveOptions{Append: []Message{{Role: "user", ContentJSON: `"` + notUTF8 + `"`}}})
		}},
		{"state_json", func(ctx context.Context, s *Session) error {
			return s.Save(ctx, SaveOptions{TokensUsed: new(uint64(7)), StateJSON: new(`"` + notUTF8 + `"`)})
		}},
		{"labels", func(ctx context.Context, s *Session) error {
			return s.Save(ctx, SaveOptions{Labels: map[string]string{"k": notUTF8}})
		}},
		{"task", func(ctx context.Context, s *Session) error { return s.Save(ctx, SaveOptions{Task: new(notUTF8)}) }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			f, s, calls := unknownPointA(t)
			err := tt.op(t.Context(), s)
			if e, ok := errors.AsType[*Error](err); !ok || !errors.Is(err, ErrInvalidArgument) || e.Reason != "INVALID_UTF8" {
				t.Fatalf("the save with invalid UTF-8: %v, want ErrInvalidArgument with reason INVALID_UTF8", err)
			}
			if s.Revision() != 1 || len(s.Pending()) != 0 || s.Task() != "task" {
				t.Errorf("a refused save changed the session: revision %d, pending %v, task %q", s.Revision(), s.Pending(), s.Task())
			}
			if err := s.PointA(t.Context(), assistantMsg, calls); err != nil {
				t.Fatalf("PointA again: %v", err)
			}
			if err := s.Save(t.Context(), SaveOptions{TokensUsed: new(uint64(5))}); err != nil {
				t.Fatalf("a good save after the refusal: %v", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			var ids []string
			for _, r := range f.saves {
				ids = append(ids, r.GetRequestId())
			}
			if len(ids) != 4 || ids[1] != ids[2] || ids[0] == ids[1] || ids[3] == ids[2] {
				t.Errorf("the daemon saw request ids %v: want Start, PointA, PointA again with the same id, Save (the refused save never sent)", ids)
			}
			if got := f.sessions["s1"].revision; got != 3 || s.Revision() != 3 {
				t.Errorf("daemon at revision %d, session at %d; want 3", got, s.Revision())
			}
		})
	}
}

// uploadSpy is a GraphCheckpointService that counts the upload messages it
// receives.
type uploadSpy struct {
	savepointv1.UnimplementedGraphCheckpointServiceServer
	received atomic.Int64
}

func (u *uploadSpy) UploadCheckpoint(s grpc.ClientStreamingServer[savepointv1.UploadCheckpointRequest, savepointv1.UploadCheckpointResponse]) error {
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return s.SendAndClose(&savepointv1.UploadCheckpointResponse{})
			}
			return err
		}
		u.received.Add(1)
	}
}

// A streamed message with invalid UTF-8 gets the same INVALID_UTF8, and
// gRPC ends the stream without sending it.
func TestStreamRefusedInvalidUTF8(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	spy := &uploadSpy{}
	savepointv1.RegisterGraphCheckpointServiceServer(srv, spy)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := Dial(t.Context(), "localhost:1", WithDialOptions(
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up, err := savepointv1.NewGraphCheckpointServiceClient(c.conn).UploadCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = up.Send(&savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Start{
		Start: &savepointv1.UploadCheckpointStart{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: notUTF8}}}})
	e, ok := errors.AsType[*Error](err)
	if !ok || !errors.Is(err, ErrInvalidArgument) || e.Reason != "INVALID_UTF8" || e.Metadata["field"] != "start.checkpoint.thread_id" {
		t.Fatalf("Send: %v, want INVALID_UTF8 on start.checkpoint.thread_id", err)
	}
	if _, err := up.CloseAndRecv(); err == nil {
		t.Error("the upload was committed after a refused message")
	}
	if n := spy.received.Load(); n != 0 {
		t.Errorf("the server received %d messages, want none", n)
	}
}
