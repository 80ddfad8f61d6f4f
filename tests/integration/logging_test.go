package integration_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// logLines returns the JSON log lines of calls to method.
func logLines(t *testing.T, logs, method string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", l, err)
		}
		if m["msg"] == "call" && m["method"] == method {
			out = append(out, m)
		}
	}
	return out
}

func findLog(t *testing.T, logs, method string) map[string]any {
	t.Helper()
	lines := logLines(t, logs, method)
	if len(lines) == 0 {
		t.Fatalf("no call line for %s in:\n%s", method, logs)
	}
	return lines[0]
}

// TestCallLogLines: one JSON line per call with method, code, reason,
// duration, session id, the API's request id, the caller's x-request-id
// (or a generated one, sent back in the response header) and the caller;
// no payload text.
func TestCallLogLines(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", -4) // debug: reads too
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket}, logger)
	c, _ := dialUnix(t, socket)

	const secret = "payload-text-that-must-never-be-logged"
	withID := metadata.AppendToOutgoingContext(ctx, "x-request-id", "caller-req-7")
	var header metadata.MD
	if _, err := c.SaveCheckpoint(withID, &savepointv1.SaveCheckpointRequest{SessionId: "logged", RequestId: "00000000-0000-4000-8000-000000000001",
		Task: secret, StateJson: `{"s":"` + secret + `"}`, AppendMessages: []*savepointv1.Message{userMsg(secret)},
		Labels: map[string]string{"k": "v"}}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := header.Get("x-request-id"); len(got) != 1 || got[0] != "caller-req-7" {
		t.Errorf("response header x-request-id %v, want the caller's", got)
	}
	header = nil
	if _, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "logged"}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	_, fenced := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "logged", ExpectedRevision: 9, Task: secret})

	all := logs.String()
	if strings.Contains(all, secret) {
		t.Fatalf("the log holds payload text:\n%s", all)
	}
	save := logLines(t, all, savepointv1.SavepointService_SaveCheckpoint_FullMethodName)
	if len(save) != 2 {
		t.Fatalf("%d SaveCheckpoint lines, want 2:\n%s", len(save), all)
	}
	ok := save[0]
	for k, want := range map[string]any{
		"level": "INFO", "code": "OK", "session_id": "logged", "request_id": "00000000-0000-4000-8000-000000000001",
		"x_request_id": "caller-req-7",
	} {
		if ok[k] != want {
			t.Errorf("save line %s = %v, want %v", k, ok[k], want)
		}
	}
	if d, isNum := ok["duration"].(float64); !isNum || d <= 0 {
		t.Errorf("save line duration %v, want a positive number of nanoseconds", ok["duration"])
	}
	if _, has := ok["reason"]; has {
		t.Errorf("an OK call has a reason: %v", ok)
	}
	if save[1]["code"] != "Aborted" || save[1]["reason"] != "REVISION_MISMATCH" {
		t.Errorf("failed save line %v, want code Aborted, reason REVISION_MISMATCH (err %v)", save[1], fenced)
	}

	read := findLog(t, all, savepointv1.SavepointService_GetSession_FullMethodName)
	rid, _ := read["x_request_id"].(string)
	if _, err := uuid.Parse(rid); err != nil || read["level"] != "DEBUG" {
		t.Errorf("read line %v: want a generated x_request_id at DEBUG level", read)
	}
	if got := header.Get("x-request-id"); len(got) != 1 || got[0] != rid {
		t.Errorf("response header x-request-id %v, want the generated %q", got, rid)
	}
	if _, has := read["request_id"]; has {
		t.Errorf("GetSession has no request_id field, yet the line has one: %v", read)
	}
}

func TestTextLogFormat(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, err := daemon.NewLogger(logs, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket}, logger)
	c, _ := dialUnix(t, socket)
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "t"}); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=call") {
			line = l
		}
	}
	for _, want := range []string{"method=/savepoint.v1.SavepointService/SaveCheckpoint", "code=OK", "session_id=t", "x_request_id=", "peer_uid=", "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("text line %q lacks %q", line, want)
		}
	}
	if _, err := daemon.NewLogger(logs, "xml", 0); err == nil {
		t.Error("NewLogger accepted format xml")
	}
}

// TestEveryWriteIsLoggedWithItsCaller: each write method's successful call is
// an INFO line naming the caller, the audit trail docs/security.md promises.
func TestEveryWriteIsLoggedWithItsCaller(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0) // info: the default
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket}, logger)
	c, _ := dialUnix(t, socket)
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "w", PendingToolUses: []*savepointv1.ToolUse{
		{ToolUseId: "t", Name: "n", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true}}})
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "w", ToolUseId: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "w", ToolUseId: "t", Output: "o"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: "w", Epoch: r.Epoch}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	all := logs.String()
	for _, m := range []string{
		savepointv1.SavepointService_SaveCheckpoint_FullMethodName,
		savepointv1.SavepointService_BeginEffect_FullMethodName,
		savepointv1.SavepointService_RecordEffect_FullMethodName,
		savepointv1.SavepointService_Resume_FullMethodName,
		savepointv1.SavepointService_DeleteSession_FullMethodName,
	} {
		line := findLog(t, all, m)
		if line["level"] != "INFO" || line["session_id"] != "w" || line["peer_uid"] == nil || line["peer_pid"] == nil {
			t.Errorf("%s: %v, want an INFO line with session_id and the caller", m, line)
		}
	}
	if reads := logLines(t, all, savepointv1.SavepointService_ListSessions_FullMethodName); len(reads) != 0 {
		t.Errorf("a successful read logged at info level: %v", reads)
	}
}

// TestReflectionFollowsTheAllowList: server reflection, a stream, is checked
// like the RPCs.
func TestReflectionFollowsTheAllowList(t *testing.T) {
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket, AllowUIDs: []uint32{4242424}}, slog.New(slog.DiscardHandler))
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	}
	// Send answers io.EOF when the server has already ended the stream; the
	// stream's status is then Recv's error.
	if err == nil || errors.Is(err, io.EOF) {
		_, err = stream.Recv()
	}
	wantReason(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
}
