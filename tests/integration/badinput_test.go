package integration_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestBadInput sends every RPC of SavepointService empty, oversized and
// malformed requests against a seeded store and checks, for each, the gRPC
// code, the ErrorInfo (domain savepoint.v1, reason, field) and that the
// whole store, as the public API shows it, is unchanged. The RPCs come from
// the service descriptor: one without cases of its own fails the test.
func TestBadInput(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	c := d.Client
	fx := seedBadInput(t, c)
	cases := badInputCases(fx)

	svc := savepointv1.File_savepoint_v1_savepoint_proto.Services().ByName("SavepointService")
	if svc == nil {
		t.Fatal("SavepointService not in the file descriptor")
	}
	methods := svc.Methods()
	known := map[string]bool{}
	for i := range methods.Len() {
		known[string(methods.Get(i).Name())] = true
	}
	for name := range cases {
		if !known[name] {
			t.Errorf("cases for %s, which SavepointService does not have", name)
		}
	}

	before := takeSnapshot(t, c, fx.probes)
	for i := range methods.Len() {
		m := methods.Get(i)
		name := string(m.Name())
		if len(cases[name]) == 0 {
			t.Errorf("%s has no bad-input cases: add them to badInputCases", name)
			continue
		}
		// Every RPC also gets a request one byte over the size limit
		// (default 4 MiB), padded with an unknown field so that it is
		// well-formed for any request type. requestCodec refuses it before
		// decoding it (TestRequestSize tries more sizes).
		const limit = 4 << 20
		all := append(cases[name], badCase{
			name: "one byte over max request size", req: paddedTo(m.Input(), limit+1),
			code: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE",
			md: map[string]string{"request_bytes": fmt.Sprint(limit + 1), "max_request_bytes": fmt.Sprint(limit)},
		})
		t.Run(name, func(t *testing.T) {
			for _, bc := range all {
				t.Run(bc.name, func(t *testing.T) {
					if got := bc.req.ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
						t.Fatalf("case request is %s, %s takes %s", got, name, m.Input().FullName())
					}
					err := invoke(t, d.Conn, m, bc)
					checkStatus(t, err, bc)
					if testing.Verbose() && err != nil {
						t.Logf("%v", err)
					}
					after := takeSnapshot(t, c, fx.probes)
					if !sameSnapshot(t, before, after) {
						before = after // report each case's own change once
					}
				})
			}
		})
	}

	// Control: the template the SaveCheckpoint cases break is itself a valid
	// save, so each case failed for its own fault and nothing else.
	if _, err := c.SaveCheckpoint(ctx, fx.goodSave()); err != nil {
		t.Fatalf("the unbroken SaveCheckpoint template fails: %v", err)
	}
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "alpha", ToolUseId: "a-idem", Epoch: 1}); err == nil {
		t.Fatal("BeginEffect of a call no longer pending succeeded")
	}
}

// badCase is one bad request and the error it must get.
type badCase struct {
	name string
	req  proto.Message
	// invalidUTF8 sends req with utf8Hole's bytes replaced by invalid UTF-8:
	// the Go client refuses to marshal such a string, so it goes out raw.
	invalidUTF8 bool

	code   codes.Code
	reason string // the ErrorInfo reason; ignored when noInfo
	field  string // the "field" metadata; "" to skip the check
	state  bool   // metadata current_revision and current_epoch expected
	noInfo bool   // no ErrorInfo at all (grpc-go answered before any handler)
	// md is metadata the ErrorInfo must hold (among other keys).
	md map[string]string
}

// badFixture is what seedBadInput made.
type badFixture struct {
	alphaReqID   string // request_id of alpha's first save
	betaToken    string // a ListMessages token of beta at revision 5
	sessToken    string // a ListSessions token with no filter
	effectsToken string // a ListEffects token of beta
	probes       []*savepointv1.RecordEffectRequest
	goodSave     func() *savepointv1.SaveCheckpointRequest
}

// seedBadInput makes:
//   - alpha: 2 revisions, epoch 1 (never resumed); revision 2 has three
//     pending tool uses: a-side (SIDE_EFFECT, begun), a-read (READ_ONLY,
//     recorded) and a-idem (IDEMPOTENT);
//   - beta: 5 revisions, resumed (epoch 2), a rewrite at revision 4
//     (keep_messages), b-1 recorded and answered, b-2 pending and begun;
//   - gone: created, resumed and deleted (a tombstone at epoch 2);
//   - done: created with a pending tool use d-1 and completed.
func seedBadInput(t *testing.T, c sp) *badFixture {
	t.Helper()
	fx := &badFixture{alphaReqID: uuid.NewString()}
	se, ro, idem := savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY, savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT

	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "alpha", RequestId: fx.alphaReqID, Task: "alpha task",
		AppendMessages: []*savepointv1.Message{userMsg("hello")}, StateJson: `{"step":1}`, Labels: map[string]string{"team": "red"}})
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "alpha", ExpectedRevision: 1, Epoch: 1, RequestId: uuid.NewString(),
		Task: "alpha task", Turn: 1, TokensUsed: 120, StateJson: `{"step":2}`, Labels: map[string]string{"team": "red"},
		AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"a-side"},{"type":"tool_use","id":"a-read"},{"type":"tool_use","id":"a-idem"}]`}},
		PendingToolUses: []*savepointv1.ToolUse{
			{ToolUseId: "a-side", Name: "send_mail", InputJson: `{"to":"x"}`, EffectClass: se, BeginTracked: true},
			{ToolUseId: "a-read", Name: "read_notes", EffectClass: ro},
			{ToolUseId: "a-idem", Name: "pay", InputJson: `{"cents":5}`, EffectClass: idem, BeginTracked: true},
		}})
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "alpha", ToolUseId: "a-side", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "alpha", ToolUseId: "a-read", Output: "notes"}); err != nil {
		t.Fatal(err)
	}

	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "beta", Task: "beta task", Labels: map[string]string{"team": "blue"},
		AppendMessages: []*savepointv1.Message{userMsg("one"), userMsg("two"), userMsg("three")}})
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "beta", ExpectedRevision: 1, Task: "beta task", Turn: 1,
		AppendMessages:  []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"b-1"}]`}},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "b-1", Name: "write_file", EffectClass: se, BeginTracked: true}}})
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "beta", ToolUseId: "b-1", Output: "written", IsError: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "beta"}); err != nil || r.Epoch != 2 {
		t.Fatalf("resume beta: %v %v", r, err)
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "beta", ExpectedRevision: 2, Epoch: 2, Task: "beta task", Turn: 1,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"b-1","content":"written"}]`}}})
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "beta", ExpectedRevision: 3, Epoch: 2, Task: "beta task", Turn: 2,
		KeepMessages: proto.Uint64(2), AppendMessages: []*savepointv1.Message{userMsg("rewound")}})
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "beta", ExpectedRevision: 4, Epoch: 2, Task: "beta task", Turn: 3,
		AppendMessages:  []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"b-2"}]`}},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "b-2", Name: "charge", EffectClass: idem, BeginTracked: true}}})
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "beta", ToolUseId: "b-2", Epoch: 2}); err != nil {
		t.Fatal(err)
	}

	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "gone", AppendMessages: []*savepointv1.Message{userMsg("bye")}})
	if _, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: "gone", Epoch: 2}); err != nil {
		t.Fatal(err)
	}

	// done: completed, with a pending tool use.
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "done", Task: "done task",
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "d-1", Name: "notify", EffectClass: se}}})
	if _, err := c.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{SessionId: "done",
		Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED, FinalOutput: "all done"}); err != nil {
		t.Fatal(err)
	}

	le, err := c.ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: "beta", PageSize: 1})
	if err != nil || le.NextPageToken == "" {
		t.Fatalf("beta's first ledger page: %v %v", le, err)
	}
	fx.effectsToken = le.NextPageToken

	lm, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: "beta", Revision: 5, PageSize: 1})
	if err != nil || lm.NextPageToken == "" {
		t.Fatalf("beta's first page: %v %v", lm, err)
	}
	fx.betaToken = lm.NextPageToken
	ls, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 1})
	if err != nil || ls.NextPageToken == "" {
		t.Fatalf("first page of sessions: %v %v", ls, err)
	}
	fx.sessToken = ls.NextPageToken

	// Recorded effects the snapshot reads back by recording them again (a
	// repeat writes nothing and returns the stored effect); b-1 is no longer
	// pending, so Reconcile does not show it.
	fx.probes = []*savepointv1.RecordEffectRequest{
		{SessionId: "alpha", ToolUseId: "a-read", Output: "notes"},
		{SessionId: "beta", ToolUseId: "b-1", Output: "written", IsError: true},
	}
	// Point B of alpha: answers its three calls and clears them.
	fx.goodSave = func() *savepointv1.SaveCheckpointRequest {
		return &savepointv1.SaveCheckpointRequest{SessionId: "alpha", ExpectedRevision: 2, Epoch: 1, RequestId: uuid.NewString(),
			Task: "alpha task", Turn: 1, TokensUsed: 300, StateJson: `{"step":3}`, Labels: map[string]string{"team": "red"},
			AppendMessages: []*savepointv1.Message{
				{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"a-side","content":"?","is_error":true}]`},
			}}
	}
	return fx
}

// utf8Hole marks, in a case's request, the string whose bytes are sent as
// invalid UTF-8 (the same length, so the wire framing stays valid). The Go
// client refuses to marshal such a string, so the case goes out raw.
//
// Proto3 string fields must hold valid UTF-8, and the protobuf decoder
// enforces it; requestCodec turns the decode failure into INVALID_UTF8 with
// the path of the field. Validation's own UTF-8 check of tool use ids
// (INVALID_TOOL_USE_ID) is therefore unreachable over gRPC.
const utf8Hole = "@@NOT-UTF-8@@"

func badInputCases(fx *badFixture) map[string][]badCase {
	const (
		inval  = codes.InvalidArgument
		notFnd = codes.NotFound
		fenced = "SESSION_FENCED"
		sid    = "session_id"
		// utf8Reason is the reason of every "invalid UTF-8" case; its field
		// is the path of the utf8Hole string.
		utf8Reason = "INVALID_UTF8"
	)
	badSessionIDs := []struct{ name, id string }{
		{"empty session_id", ""},
		{"session_id with slash", "alpha/x"},
		{"session_id with NUL", "alpha\x00"},
		{"session_id of 10 KB", strings.Repeat("a", 10<<10)},
		{"session_id of 129 chars", strings.Repeat("b", 129)},
		{"session_id starting with dot", ".alpha"},
		{"session_id starting with dash", "-alpha"},
		{"session_id with space", "al pha"},
		{"session_id with non-ASCII", "alphä"},
		{"session_id with newline", "alpha\n"},
	}
	badToolUseIDs := []struct{ name, id string }{
		{"empty tool_use_id", ""},
		{"tool_use_id with NUL", "a-side\x00"},
		{"tool_use_id of 10 KB", strings.Repeat("t", 10<<10)},
		{"tool_use_id of 513 bytes", strings.Repeat("t", 513)},
	}
	// perSession returns, for each bad session id, mk(id) expecting
	// INVALID_SESSION_ID, plus the unknown and the deleted session.
	perSession := func(mk func(id string) proto.Message, unknown badCase) []badCase {
		var out []badCase
		for _, b := range badSessionIDs {
			out = append(out, badCase{name: b.name, req: mk(b.id), code: inval, reason: "INVALID_SESSION_ID", field: sid})
		}
		out = append(out, badCase{name: "session_id invalid UTF-8", req: mk("a" + utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: sid})
		for _, id := range []string{"nobody", "gone"} {
			u := unknown
			u.name = strings.ReplaceAll(u.name, "%s", id)
			u.req = mk(id)
			out = append(out, u)
		}
		return out
	}
	sessionNotFound := badCase{name: "session %s", code: notFnd, reason: "SESSION_NOT_FOUND"}

	cases := map[string][]badCase{}

	// SaveCheckpoint: the cases break fx.goodSave, a valid Point B of alpha.
	save := func(name string, code codes.Code, reason, field string, edit func(r *savepointv1.SaveCheckpointRequest)) badCase {
		r := fx.goodSave()
		edit(r)
		return badCase{name: name, req: r, code: code, reason: reason, field: field}
	}
	stateErr := func(bc badCase) badCase { bc.state = true; return bc }
	msg := func(content string) *savepointv1.Message {
		return &savepointv1.Message{Role: "user", ContentJson: content}
	}
	tool := func(id string) *savepointv1.ToolUse { return &savepointv1.ToolUse{ToolUseId: id, Name: "w"} }
	bigString := func(n int) string { return `"` + strings.Repeat("x", n-2) + `"` } // JSON, n bytes
	sc := []badCase{
		{name: "empty request", req: &savepointv1.SaveCheckpointRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid},
	}
	for _, b := range badSessionIDs {
		sc = append(sc, save(b.name, inval, "INVALID_SESSION_ID", sid, func(r *savepointv1.SaveCheckpointRequest) { r.SessionId = b.id }))
	}
	sc = append(sc,
		save("session_id invalid UTF-8", inval, utf8Reason, sid, func(r *savepointv1.SaveCheckpointRequest) { r.SessionId = "a" + utf8Hole }),
		save("request_id invalid UTF-8", inval, utf8Reason, "request_id", func(r *savepointv1.SaveCheckpointRequest) { r.RequestId = utf8Hole }),
		save("task invalid UTF-8", inval, utf8Reason, "task", func(r *savepointv1.SaveCheckpointRequest) { r.Task = "report " + utf8Hole }),
		save("third message's role invalid UTF-8", inval, utf8Reason, "append_messages[2].role", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages = append(r.AppendMessages, msg(`"ok"`), &savepointv1.Message{Role: utf8Hole, ContentJson: `"x"`})
		}),
		save("second tool use's input_json invalid UTF-8", inval, utf8Reason, "pending_tool_uses[1].input_json", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{tool("n-1"), {ToolUseId: "n-2", Name: "w", InputJson: `{"p":"` + utf8Hole + `"}`}}
		}),
		save("second tool use's name invalid UTF-8, after a bad third one", inval, utf8Reason, "pending_tool_uses[1].name", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{tool("n-1"), {ToolUseId: "n-2", Name: utf8Hole}, tool("")}
		}),
		save("label key invalid UTF-8", inval, utf8Reason, "labels", func(r *savepointv1.SaveCheckpointRequest) { r.Labels = map[string]string{"team": "red", utf8Hole: "x"} }),
		save("label value invalid UTF-8", inval, utf8Reason, "labels", func(r *savepointv1.SaveCheckpointRequest) { r.Labels = map[string]string{"team": utf8Hole} }),
		save("request_id not a UUID", inval, "INVALID_REQUEST_ID", "request_id", func(r *savepointv1.SaveCheckpointRequest) { r.RequestId = "retry-1" }),
		save("request_id of 10 KB", inval, "INVALID_REQUEST_ID", "request_id", func(r *savepointv1.SaveCheckpointRequest) { r.RequestId = strings.Repeat("f", 10<<10) }),
		save("request_id reused for another save", inval, "REQUEST_ID_REUSED", "", func(r *savepointv1.SaveCheckpointRequest) { r.RequestId = fx.alphaReqID }),
		save("message without role", inval, "MISSING_FIELD", "append_messages[0].role", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].Role = "" }),
		save("role of 10 KB", inval, "FIELD_TOO_LARGE", "append_messages[0].role", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].Role = strings.Repeat("r", 10<<10) }),
		save("empty content_json", inval, "INVALID_JSON", "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = "" }),
		save("content_json not JSON", inval, "INVALID_JSON", "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = `{"type":` }),
		save("content_json with trailing data", inval, "INVALID_JSON", "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = `{} {}` }),
		save("content_json with NUL", inval, "INVALID_JSON", "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = "\"a\x00\"" }),
		save("content_json invalid UTF-8", inval, utf8Reason, "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = `"` + utf8Hole + `"` }),
		save("third message not JSON", inval, "INVALID_JSON", "append_messages[2].content_json", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages = append(r.AppendMessages, msg(`"ok"`), msg(`nope`))
		}),
		save("content_json over max message bytes", inval, "MESSAGE_TOO_LARGE", "append_messages[0].content_json", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages[0].ContentJson = bigString(2<<20 + 1)
		}),
		save("empty tool_use_id", inval, "INVALID_TOOL_USE_ID", "pending_tool_uses[0].tool_use_id", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses = []*savepointv1.ToolUse{tool("")} }),
	)
	for _, b := range badToolUseIDs[1:] {
		sc = append(sc, save(b.name, inval, "INVALID_TOOL_USE_ID", "pending_tool_uses[0].tool_use_id", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses = []*savepointv1.ToolUse{tool(b.id)} }))
	}
	sc = append(sc,
		save("tool_use_id invalid UTF-8", inval, utf8Reason, "pending_tool_uses[0].tool_use_id", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses = []*savepointv1.ToolUse{tool(utf8Hole)} }),
		save("second tool use without tool_use_id", inval, "INVALID_TOOL_USE_ID", "pending_tool_uses[1].tool_use_id", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{tool("n-1"), tool("")}
		}),
		save("tool use without name", inval, "MISSING_FIELD", "pending_tool_uses[0].name", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1"}}
		}),
		save("tool name of 10 KB", inval, "FIELD_TOO_LARGE", "pending_tool_uses[0].name", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1", Name: strings.Repeat("n", 10<<10)}}
		}),
		save("input_json not JSON", inval, "INVALID_JSON", "pending_tool_uses[0].input_json", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1", Name: "w", InputJson: `{"path":"a"`}}
		}),
		save("input_json bare word", inval, "INVALID_JSON", "pending_tool_uses[0].input_json", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1", Name: "w", InputJson: `undefined`}}
		}),
		save("effect_class 99", inval, "INVALID_EFFECT_CLASS", "pending_tool_uses[0].effect_class", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1", Name: "w", EffectClass: 99}}
		}),
		save("effect_class -1", inval, "INVALID_EFFECT_CLASS", "pending_tool_uses[0].effect_class", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{{ToolUseId: "n-1", Name: "w", EffectClass: -1}}
		}),
		save("duplicate tool_use_id", inval, "DUPLICATE_TOOL_USE_ID", "pending_tool_uses[1].tool_use_id", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = []*savepointv1.ToolUse{tool("n-1"), tool("n-1")}
		}),
		save("state_json not JSON", inval, "INVALID_JSON", "state_json", func(r *savepointv1.SaveCheckpointRequest) { r.StateJson = `{step:3}` }),
		save("state_json invalid UTF-8", inval, utf8Reason, "state_json", func(r *savepointv1.SaveCheckpointRequest) { r.StateJson = `"` + utf8Hole + `"` }),
		save("state_json over max state bytes", inval, "STATE_TOO_LARGE", "state_json", func(r *savepointv1.SaveCheckpointRequest) { r.StateJson = bigString(1<<20 + 1) }),
		save("task over 64 KiB", inval, "FIELD_TOO_LARGE", "task", func(r *savepointv1.SaveCheckpointRequest) { r.Task = strings.Repeat("t", 64<<10+1) }),
		save("label key upper case", inval, "INVALID_LABEL", "labels", func(r *savepointv1.SaveCheckpointRequest) { r.Labels = map[string]string{"Team": "red"} }),
		save("label key empty", inval, "INVALID_LABEL", "labels", func(r *savepointv1.SaveCheckpointRequest) { r.Labels = map[string]string{"": "red"} }),
		save("label key of 64 chars", inval, "INVALID_LABEL", "labels", func(r *savepointv1.SaveCheckpointRequest) {
			r.Labels = map[string]string{strings.Repeat("k", 64): "red"}
		}),
		save("label value of 10 KB", inval, "INVALID_LABEL", "labels", func(r *savepointv1.SaveCheckpointRequest) {
			r.Labels = map[string]string{"team": strings.Repeat("v", 10<<10)}
		}),
		save("65 labels", inval, "INVALID_LABEL", "labels", func(r *savepointv1.SaveCheckpointRequest) {
			r.Labels = map[string]string{}
			for i := range 65 {
				r.Labels[fmt.Sprintf("k%d", i)] = "v"
			}
		}),
		save("pending tool uses over the response budget", inval, "FIELD_TOO_LARGE", "pending_tool_uses", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = nil // each input under its own cap, together over the budget
			for i := range 4 {
				r.PendingToolUses = append(r.PendingToolUses, &savepointv1.ToolUse{ToolUseId: fmt.Sprint("n-", i), Name: "w", InputJson: bigString(900 << 10)})
			}
		}),
		save("three 1.5 MiB messages, over max request size", codes.ResourceExhausted, "REQUEST_TOO_LARGE", "", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages = []*savepointv1.Message{msg(bigString(1536 << 10)), msg(bigString(1536 << 10)), msg(bigString(1536 << 10))}
		}),
		stateErr(save("keep_messages beyond the history", inval, "KEEP_MESSAGES_OUT_OF_RANGE", "", func(r *savepointv1.SaveCheckpointRequest) { r.KeepMessages = proto.Uint64(3) })),
		stateErr(save("keep_messages max uint64", inval, "KEEP_MESSAGES_OUT_OF_RANGE", "", func(r *savepointv1.SaveCheckpointRequest) { r.KeepMessages = proto.Uint64(math.MaxUint64) })),
		stateErr(save("expected_revision behind", codes.Aborted, "REVISION_MISMATCH", "", func(r *savepointv1.SaveCheckpointRequest) { r.ExpectedRevision = 1 })),
		stateErr(save("expected_revision ahead", codes.Aborted, "REVISION_MISMATCH", "", func(r *savepointv1.SaveCheckpointRequest) { r.ExpectedRevision = math.MaxUint64 })),
		stateErr(save("create over an existing session", codes.AlreadyExists, "SESSION_EXISTS", "", func(r *savepointv1.SaveCheckpointRequest) { r.ExpectedRevision = 0 })),
		stateErr(save("epoch from the future", codes.Aborted, fenced, "", func(r *savepointv1.SaveCheckpointRequest) { r.Epoch = 2 })),
		stateErr(save("stale epoch on a resumed session", codes.Aborted, fenced, "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision, r.Epoch = "beta", 5, 1
		})),
		stateErr(save("epoch 0 on a resumed session", codes.Aborted, fenced, "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision, r.Epoch = "beta", 5, 0
		})),
		stateErr(save("fencing wins over a revision mismatch", codes.Aborted, fenced, "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision, r.Epoch = "beta", 3, 1
		})),
		stateErr(save("recorded call made pending again, after appending", codes.FailedPrecondition, "CALL_ALREADY_RECORDED", "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision, r.Epoch = "beta", 5, 2
			r.AppendMessages = append(r.AppendMessages, msg(`"more"`))
			r.PendingToolUses = []*savepointv1.ToolUse{tool("b-new"), tool("b-1")}
		})),
		save("expected_revision on an unknown session", notFnd, "SESSION_NOT_FOUND", "", func(r *savepointv1.SaveCheckpointRequest) { r.SessionId = "nobody" }),
		save("expected_revision on a deleted session", notFnd, "SESSION_NOT_FOUND", "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision = "gone", 1
		}),
		stateErr(save("re-create a deleted session with a stale epoch", codes.Aborted, fenced, "", func(r *savepointv1.SaveCheckpointRequest) {
			r.SessionId, r.ExpectedRevision, r.Epoch = "gone", 0, 2
		})),
	)
	for i := range sc {
		sc[i].invalidUTF8 = strings.Contains(sc[i].name, "invalid UTF-8")
	}
	cases["SaveCheckpoint"] = sc

	// BeginEffect.
	begin := func(s, id string, epoch uint64) *savepointv1.BeginEffectRequest {
		return &savepointv1.BeginEffectRequest{SessionId: s, ToolUseId: id, Epoch: epoch}
	}
	bc := append([]badCase{{name: "empty request", req: &savepointv1.BeginEffectRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return begin(id, "a-side", 1) }, sessionNotFound)...)
	for _, b := range badToolUseIDs {
		bc = append(bc, badCase{name: b.name, req: begin("alpha", b.id, 1), code: inval, reason: "INVALID_TOOL_USE_ID", field: "tool_use_id"})
	}
	bc = append(bc,
		badCase{name: "tool_use_id invalid UTF-8", req: begin("alpha", utf8Hole, 1), invalidUTF8: true, code: inval, reason: utf8Reason, field: "tool_use_id"},
		badCase{name: "unknown tool use", req: begin("alpha", "a-nope", 1), code: codes.FailedPrecondition, reason: "CALL_NOT_PENDING", state: true},
		badCase{name: "another session's tool use", req: begin("alpha", "b-2", 1), code: codes.FailedPrecondition, reason: "CALL_NOT_PENDING", state: true},
		badCase{name: "tool use pending only in an older revision", req: begin("beta", "b-1", 2), code: codes.FailedPrecondition, reason: "CALL_NOT_PENDING", state: true},
		badCase{name: "recorded tool use", req: begin("alpha", "a-read", 1), code: codes.FailedPrecondition, reason: "CALL_ALREADY_RECORDED", state: true},
		badCase{name: "stale epoch", req: begin("beta", "b-2", 1), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch 0 on a resumed session", req: begin("beta", "b-2", 0), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch from the future", req: begin("alpha", "a-idem", 7), code: codes.Aborted, reason: fenced, state: true},
	)
	cases["BeginEffect"] = bc

	// RecordEffect.
	record := func(s, id, name, out string, isErr bool) *savepointv1.RecordEffectRequest {
		return &savepointv1.RecordEffectRequest{SessionId: s, ToolUseId: id, Name: name, Output: out, IsError: isErr}
	}
	rc := append([]badCase{{name: "empty request", req: &savepointv1.RecordEffectRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return record(id, "a-side", "", "sent", false) }, sessionNotFound)...)
	for _, b := range badToolUseIDs {
		rc = append(rc, badCase{name: b.name, req: record("alpha", b.id, "", "sent", false), code: inval, reason: "INVALID_TOOL_USE_ID", field: "tool_use_id"})
	}
	rc = append(rc,
		badCase{name: "tool_use_id invalid UTF-8", req: record("alpha", utf8Hole, "", "sent", false), invalidUTF8: true, code: inval, reason: utf8Reason, field: "tool_use_id"},
		badCase{name: "name invalid UTF-8", req: record("alpha", "a-side", utf8Hole, "sent", false), invalidUTF8: true, code: inval, reason: utf8Reason, field: "name"},
		badCase{name: "output invalid UTF-8", req: record("alpha", "a-side", "", utf8Hole, false), invalidUTF8: true, code: inval, reason: utf8Reason, field: "output"},
		badCase{name: "unknown tool use", req: record("alpha", "a-nope", "", "sent", false), code: notFnd, reason: "CALL_UNKNOWN"},
		badCase{name: "another session's tool use", req: record("alpha", "b-1", "", "written", true), code: notFnd, reason: "CALL_UNKNOWN"},
		badCase{name: "name of 10 KB", req: record("alpha", "a-side", strings.Repeat("n", 10<<10), "sent", false), code: inval, reason: "FIELD_TOO_LARGE", field: "name"},
		badCase{name: "output over max message bytes", req: record("alpha", "a-side", "", strings.Repeat("o", 2<<20+1), false), code: inval, reason: "FIELD_TOO_LARGE", field: "output"},
		badCase{name: "name of another tool", req: record("alpha", "a-side", "read_notes", "sent", false), code: codes.FailedPrecondition, reason: "TOOL_NAME_MISMATCH"},
		badCase{name: "different output", req: record("alpha", "a-read", "", "other notes", false), code: codes.AlreadyExists, reason: "EFFECT_CONFLICT", state: true},
		badCase{name: "different is_error", req: record("alpha", "a-read", "", "notes", true), code: codes.AlreadyExists, reason: "EFFECT_CONFLICT", state: true},
		badCase{name: "different outcome of a call no longer pending", req: record("beta", "b-1", "", "written", false), code: codes.AlreadyExists, reason: "EFFECT_CONFLICT", state: true},
	)
	cases["RecordEffect"] = rc

	// ResolveEffect: a-side is in doubt; nothing here may resolve it.
	done, notDone := savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE, savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE
	person := savepointv1.ResolverKind_RESOLVER_KIND_PERSON
	resolve := func(s, id string, edit ...func(*savepointv1.ResolveEffectRequest)) *savepointv1.ResolveEffectRequest {
		r := &savepointv1.ResolveEffectRequest{SessionId: s, ToolUseId: id, Outcome: done, Output: "sent", ResolverKind: person}
		for _, e := range edit {
			e(r)
		}
		return r
	}
	rv := append([]badCase{{name: "empty request", req: &savepointv1.ResolveEffectRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return resolve(id, "a-side") }, sessionNotFound)...)
	for _, b := range badToolUseIDs {
		rv = append(rv, badCase{name: b.name, req: resolve("alpha", b.id), code: inval, reason: "INVALID_TOOL_USE_ID", field: "tool_use_id"})
	}
	rv = append(rv,
		badCase{name: "tool_use_id invalid UTF-8", req: resolve("alpha", utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "tool_use_id"},
		badCase{name: "note invalid UTF-8", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Note = utf8Hole }), invalidUTF8: true, code: inval, reason: utf8Reason, field: "note"},
		badCase{name: "outcome unspecified", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Outcome = 0 }), code: inval, reason: "MISSING_FIELD", field: "outcome"},
		badCase{name: "outcome unknown", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Outcome = 9 }), code: inval, reason: "INVALID_RESOLUTION", field: "outcome"},
		badCase{name: "resolver kind unspecified", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.ResolverKind = 0 }), code: inval, reason: "MISSING_FIELD", field: "resolver_kind"},
		badCase{name: "resolver kind unknown", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.ResolverKind = 9 }), code: inval, reason: "INVALID_RESOLUTION", field: "resolver_kind"},
		badCase{name: "NOT_DONE with output", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Outcome = notDone }), code: inval, reason: "INVALID_RESOLUTION", field: "output"},
		badCase{name: "NOT_DONE with is_error", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Outcome, r.Output, r.IsError = notDone, "", true }), code: inval, reason: "INVALID_RESOLUTION", field: "is_error"},
		badCase{name: "output over max message bytes", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Output = strings.Repeat("o", 2<<20+1) }), code: inval, reason: "FIELD_TOO_LARGE", field: "output"},
		badCase{name: "note over 4 KiB", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Note = strings.Repeat("n", 4097) }), code: inval, reason: "FIELD_TOO_LARGE", field: "note"},
		badCase{name: "resolved_by of 10 KB", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.ResolvedBy = strings.Repeat("p", 10<<10) }), code: inval, reason: "FIELD_TOO_LARGE", field: "resolved_by"},
		badCase{name: "request_id not a UUID", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.RequestId = "not-a-uuid" }), code: inval, reason: "INVALID_REQUEST_ID", field: "request_id"},
		badCase{name: "unknown tool use", req: resolve("alpha", "a-nope"), code: notFnd, reason: "CALL_UNKNOWN"},
		badCase{name: "recorded tool use", req: resolve("alpha", "a-read"), code: codes.FailedPrecondition, reason: "CALL_NOT_IN_DOUBT", state: true},
		badCase{name: "idempotent tool use", req: resolve("alpha", "a-idem"), code: codes.FailedPrecondition, reason: "CALL_NOT_IN_DOUBT", state: true},
		badCase{name: "tool use pending only in an older revision", req: resolve("beta", "b-1"), code: codes.FailedPrecondition, reason: "CALL_NOT_IN_DOUBT", state: true},
		badCase{name: "stale epoch", req: resolve("beta", "b-2", func(r *savepointv1.ResolveEffectRequest) { r.Epoch = proto.Uint64(1) }), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch from the future", req: resolve("alpha", "a-side", func(r *savepointv1.ResolveEffectRequest) { r.Epoch = proto.Uint64(7) }), code: codes.Aborted, reason: fenced, state: true},
	)
	cases["ResolveEffect"] = rv

	// ApproveEffect: no call of the seed waits for approval; a-side is
	// begun without one, a-read recorded.
	approved := savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	approve := func(s, id string, edit ...func(*savepointv1.ApproveEffectRequest)) *savepointv1.ApproveEffectRequest {
		r := &savepointv1.ApproveEffectRequest{SessionId: s, ToolUseId: id, Decision: approved, DecidedBy: "alice"}
		for _, e := range edit {
			e(r)
		}
		return r
	}
	av := append([]badCase{{name: "empty request", req: &savepointv1.ApproveEffectRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return approve(id, "a-side") }, sessionNotFound)...)
	for _, b := range badToolUseIDs {
		av = append(av, badCase{name: b.name, req: approve("alpha", b.id), code: inval, reason: "INVALID_TOOL_USE_ID", field: "tool_use_id"})
	}
	av = append(av,
		badCase{name: "tool_use_id invalid UTF-8", req: approve("alpha", utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "tool_use_id"},
		badCase{name: "note invalid UTF-8", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.Note = utf8Hole }), invalidUTF8: true, code: inval, reason: utf8Reason, field: "note"},
		badCase{name: "decision unspecified", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.Decision = 0 }), code: inval, reason: "MISSING_FIELD", field: "decision"},
		badCase{name: "decision WAITING", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) {
			r.Decision = savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING
		}), code: inval, reason: "INVALID_APPROVAL", field: "decision"},
		badCase{name: "decision unknown", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.Decision = 9 }), code: inval, reason: "INVALID_APPROVAL", field: "decision"},
		badCase{name: "input_digest of 5 bytes", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.InputDigest = []byte("short") }), code: inval, reason: "INVALID_APPROVAL", field: "input_digest"},
		badCase{name: "note over 4 KiB", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.Note = strings.Repeat("n", 4097) }), code: inval, reason: "FIELD_TOO_LARGE", field: "note"},
		badCase{name: "decided_by of 10 KB", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.DecidedBy = strings.Repeat("p", 10<<10) }), code: inval, reason: "FIELD_TOO_LARGE", field: "decided_by"},
		badCase{name: "request_id not a UUID", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.RequestId = "not-a-uuid" }), code: inval, reason: "INVALID_REQUEST_ID", field: "request_id"},
		badCase{name: "unknown tool use", req: approve("alpha", "a-nope"), code: notFnd, reason: "CALL_UNKNOWN"},
		badCase{name: "tool use begun without approval", req: approve("alpha", "a-side"), code: codes.FailedPrecondition, reason: "APPROVAL_NOT_WAITING", state: true},
		badCase{name: "recorded tool use", req: approve("alpha", "a-read"), code: codes.FailedPrecondition, reason: "APPROVAL_NOT_WAITING", state: true},
		badCase{name: "epoch from the future", req: approve("alpha", "a-side", func(r *savepointv1.ApproveEffectRequest) { r.Epoch = proto.Uint64(7) }), code: codes.Aborted, reason: fenced, state: true},
	)
	cases["ApproveEffect"] = av
	cases["SaveCheckpoint"] = append(cases["SaveCheckpoint"],
		badCase{name: "completed session", req: &savepointv1.SaveCheckpointRequest{SessionId: "done", ExpectedRevision: 1}, code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true})
	cases["BeginEffect"] = append(cases["BeginEffect"],
		badCase{name: "completed session", req: &savepointv1.BeginEffectRequest{SessionId: "done", ToolUseId: "d-1"}, code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true})

	// Resume, Reconcile and GetSession take a session id.
	cases["Resume"] = append([]badCase{{name: "empty request", req: &savepointv1.ResumeRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return &savepointv1.ResumeRequest{SessionId: id} }, sessionNotFound)...)
	cases["Reconcile"] = append([]badCase{{name: "empty request", req: &savepointv1.ReconcileRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return &savepointv1.ReconcileRequest{SessionId: id} }, sessionNotFound)...)
	cases["Reconcile"] = append(cases["Reconcile"],
		badCase{name: "garbage page_token", req: &savepointv1.ReconcileRequest{SessionId: "alpha", PageToken: "garbage!"}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "page_token of 10 KB", req: &savepointv1.ReconcileRequest{SessionId: "alpha", PageToken: strings.Repeat("A", 10<<10)}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "page_token invalid UTF-8", req: &savepointv1.ReconcileRequest{SessionId: "alpha", PageToken: utf8Hole}, invalidUTF8: true, code: inval, reason: utf8Reason, field: "page_token"},
	)
	cases["GetSession"] = append(append([]badCase{{name: "empty request", req: &savepointv1.GetSessionRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return &savepointv1.GetSessionRequest{SessionId: id} }, sessionNotFound)...),
		badCase{name: "revision above the latest", req: &savepointv1.GetSessionRequest{SessionId: "alpha", Revision: proto.Uint64(3)}, code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
		badCase{name: "revision max uint64", req: &savepointv1.GetSessionRequest{SessionId: "beta", Revision: proto.Uint64(math.MaxUint64)}, code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
	)

	// ListMessages.
	lm := func(s string, rev uint64, size int32, token string) *savepointv1.ListMessagesRequest {
		return &savepointv1.ListMessagesRequest{SessionId: s, Revision: rev, PageSize: size, PageToken: token}
	}
	forged := func(s string, rev, next uint64) string { // a ListMessages token as the daemon encodes it
		b := []byte{1, 1}
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
		b = binary.AppendUvarint(b, rev)
		b = binary.AppendUvarint(b, next)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	badToken := func(name, s string, rev uint64, token string) badCase {
		return badCase{name: name, req: lm(s, rev, 0, token), code: inval, reason: "INVALID_PAGE_TOKEN"}
	}
	cases["ListMessages"] = append(append([]badCase{{name: "empty request", req: &savepointv1.ListMessagesRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return lm(id, 0, 0, "") }, sessionNotFound)...),
		badCase{name: "page_size -1", req: lm("beta", 0, -1, ""), code: inval, reason: "INVALID_PAGE_SIZE", field: "page_size"},
		badCase{name: "page_size min int32", req: lm("beta", 5, math.MinInt32, fx.betaToken), code: inval, reason: "INVALID_PAGE_SIZE", field: "page_size"},
		badToken("garbage page_token", "beta", 0, "garbage!"),
		badToken("page_token not base64", "beta", 0, "%%%%"),
		badToken("page_token of 10 KB", "beta", 0, strings.Repeat("A", 10<<10)),
		badCase{name: "page_token invalid UTF-8", req: lm("beta", 0, 0, utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "page_token"},
		badToken("page_token truncated", "beta", 0, fx.betaToken[:len(fx.betaToken)-2]),
		badToken("page_token with a byte appended", "beta", 0, fx.betaToken+"A"),
		badToken("page_token of another session", "alpha", 0, fx.betaToken),
		badToken("page_token of another revision", "beta", 4, fx.betaToken),
		badToken("ListSessions page_token", "beta", 0, fx.sessToken),
		badToken("forged page_token beyond the history", "beta", 0, forged("beta", 5, 99)),
		badToken("forged page_token of unknown version", "beta", 0, base64.RawURLEncoding.EncodeToString([]byte{9, 1, 4, 'b', 'e', 't', 'a', 5, 1})),
		badCase{name: "revision above the latest", req: lm("beta", 6, 0, ""), code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
		badCase{name: "forged page_token of a revision above the latest", req: lm("beta", 0, 0, forged("beta", 6, 1)), code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
	)

	// ListSessions.
	ls := func(size int32, token string, filter map[string]string) *savepointv1.ListSessionsRequest {
		return &savepointv1.ListSessionsRequest{PageSize: size, PageToken: token, LabelFilter: filter}
	}
	manyLabels := map[string]string{}
	for i := range 65 {
		manyLabels[fmt.Sprintf("k%d", i)] = "v"
	}
	cases["ListSessions"] = []badCase{
		{name: "page_size -1", req: ls(-1, "", nil), code: inval, reason: "INVALID_PAGE_SIZE", field: "page_size"},
		{name: "page_size min int32", req: ls(math.MinInt32, "", nil), code: inval, reason: "INVALID_PAGE_SIZE", field: "page_size"},
		{name: "garbage page_token", req: ls(0, "garbage!", nil), code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "page_token of 10 KB", req: ls(0, strings.Repeat("A", 10<<10), nil), code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "ListMessages page_token", req: ls(0, fx.betaToken, nil), code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "page_token of another label_filter", req: ls(0, fx.sessToken, map[string]string{"team": "red"}), code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "label_filter key upper case", req: ls(0, "", map[string]string{"Team": "red"}), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "label_filter key with slash", req: ls(0, "", map[string]string{"a/b": "red"}), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "label_filter value of 10 KB", req: ls(0, "", map[string]string{"team": strings.Repeat("v", 10<<10)}), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "label_filter key invalid UTF-8", req: ls(0, "", map[string]string{"a" + utf8Hole: "red"}), invalidUTF8: true, code: inval, reason: utf8Reason, field: "label_filter"},
		{name: "label_filter value invalid UTF-8", req: ls(0, "", map[string]string{"team": utf8Hole}), invalidUTF8: true, code: inval, reason: utf8Reason, field: "label_filter"},
		{name: "page_token invalid UTF-8", req: ls(0, utf8Hole, nil), invalidUTF8: true, code: inval, reason: utf8Reason, field: "page_token"},
		{name: "65 labels in label_filter", req: ls(0, "", manyLabels), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "status_filter not a status", req: &savepointv1.ListSessionsRequest{StatusFilter: 99}, code: inval, reason: "INVALID_SESSION_STATUS", field: "status_filter"},
		{name: "status_filter negative", req: &savepointv1.ListSessionsRequest{StatusFilter: -1}, code: inval, reason: "INVALID_SESSION_STATUS", field: "status_filter"},
		{name: "min_idle negative", req: &savepointv1.ListSessionsRequest{MinIdle: durationpb.New(-time.Minute)}, code: inval, reason: "INVALID_ARGUMENT", field: "min_idle"},
		{name: "min_idle out of range", req: &savepointv1.ListSessionsRequest{MinIdle: &durationpb.Duration{Seconds: math.MaxInt64}}, code: inval, reason: "INVALID_ARGUMENT", field: "min_idle"},
		{name: "min_idle with mixed signs", req: &savepointv1.ListSessionsRequest{MinIdle: &durationpb.Duration{Seconds: 5, Nanos: -1}}, code: inval, reason: "INVALID_ARGUMENT", field: "min_idle"},
		{name: "page_token of another status_filter", req: &savepointv1.ListSessionsRequest{PageToken: fx.sessToken, StatusFilter: savepointv1.SessionStatus_SESSION_STATUS_ACTIVE}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "page_token of another has_pending_tool_uses", req: &savepointv1.ListSessionsRequest{PageToken: fx.sessToken, HasPendingToolUses: true}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "page_token of another min_idle", req: &savepointv1.ListSessionsRequest{PageToken: fx.sessToken, MinIdle: durationpb.New(time.Hour)}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "order_by unknown", req: &savepointv1.ListSessionsRequest{OrderBy: "create_time"}, code: inval, reason: "INVALID_ORDER_BY", field: "order_by"},
		{name: "order_by ascending update", req: &savepointv1.ListSessionsRequest{OrderBy: "update_time"}, code: inval, reason: "INVALID_ORDER_BY", field: "order_by"},
		{name: "order_by invalid UTF-8", req: &savepointv1.ListSessionsRequest{OrderBy: utf8Hole}, invalidUTF8: true, code: inval, reason: utf8Reason, field: "order_by"},
		{name: "page_token of the other order", req: &savepointv1.ListSessionsRequest{PageToken: fx.sessToken, OrderBy: "update_time desc"}, code: inval, reason: "INVALID_PAGE_TOKEN"},
		{name: "ListEffects page_token", req: ls(0, fx.effectsToken, nil), code: inval, reason: "INVALID_PAGE_TOKEN"},
	}

	// CompleteSession.
	completed := savepointv1.SessionStatus_SESSION_STATUS_COMPLETED
	cs := func(s string, epoch uint64, st savepointv1.SessionStatus, out string) *savepointv1.CompleteSessionRequest {
		return &savepointv1.CompleteSessionRequest{SessionId: s, Epoch: epoch, Status: st, FinalOutput: out}
	}
	withID := func(r *savepointv1.CompleteSessionRequest, id string) *savepointv1.CompleteSessionRequest {
		r.RequestId = id
		return r
	}
	cases["CompleteSession"] = append(append([]badCase{{name: "empty request", req: &savepointv1.CompleteSessionRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return cs(id, 2, completed, "x") }, sessionNotFound)...),
		badCase{name: "status unspecified", req: cs("alpha", 1, 0, "x"), code: inval, reason: "INVALID_SESSION_STATUS", field: "status"},
		badCase{name: "status active", req: cs("alpha", 1, savepointv1.SessionStatus_SESSION_STATUS_ACTIVE, "x"), code: inval, reason: "INVALID_SESSION_STATUS", field: "status"},
		badCase{name: "status not a status", req: cs("alpha", 1, 77, "x"), code: inval, reason: "INVALID_SESSION_STATUS", field: "status"},
		badCase{name: "final_output over max state bytes", req: cs("alpha", 1, completed, strings.Repeat("o", 1<<20+1)), code: inval, reason: "FIELD_TOO_LARGE", field: "final_output"},
		badCase{name: "final_output invalid UTF-8", req: cs("alpha", 1, completed, utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "final_output"},
		badCase{name: "request_id not a UUID", req: withID(cs("alpha", 1, completed, "x"), "retry-1"), code: inval, reason: "INVALID_REQUEST_ID", field: "request_id"},
		badCase{name: "request_id invalid UTF-8", req: withID(cs("alpha", 1, completed, "x"), utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "request_id"},
		badCase{name: "request_id of a save", req: withID(cs("alpha", 1, completed, "x"), fx.alphaReqID), code: inval, reason: "REQUEST_ID_REUSED"},
		badCase{name: "stale epoch", req: cs("beta", 1, completed, "x"), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch 0 on a resumed session", req: cs("beta", 0, completed, "x"), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch from the future", req: cs("alpha", 2, completed, "x"), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "completed session, another output", req: cs("done", 1, completed, "other"), code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true},
		badCase{name: "completed session, failed", req: cs("done", 1, savepointv1.SessionStatus_SESSION_STATUS_FAILED, "all done"), code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true},
		badCase{name: "completed session, epoch 0", req: cs("done", 0, completed, "other"), code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true},
	)

	// Backup streams its response; its refusals come before any data. The
	// daemon's store has no encryption key.
	// WatchSessions: ListSessions' filters, and the heartbeat interval.
	wr := func(m func(*savepointv1.WatchSessionsRequest)) *savepointv1.WatchSessionsRequest {
		r := &savepointv1.WatchSessionsRequest{}
		m(r)
		return r
	}
	cases["WatchSessions"] = []badCase{
		{name: "label_filter key upper case", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.LabelFilter = map[string]string{"Team": "red"} }), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "label_filter value invalid UTF-8", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.LabelFilter = map[string]string{"team": utf8Hole} }), invalidUTF8: true, code: inval, reason: utf8Reason, field: "label_filter"},
		{name: "65 labels in label_filter", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.LabelFilter = manyLabels }), code: inval, reason: "INVALID_LABEL", field: "label_filter"},
		{name: "status_filter not a status", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.StatusFilter = 99 }), code: inval, reason: "INVALID_SESSION_STATUS", field: "status_filter"},
		{name: "min_idle negative", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.MinIdle = durationpb.New(-time.Minute) }), code: inval, reason: "INVALID_ARGUMENT", field: "min_idle"},
		{name: "min_idle out of range", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.MinIdle = &durationpb.Duration{Seconds: math.MaxInt64} }), code: inval, reason: "INVALID_ARGUMENT", field: "min_idle"},
		{name: "heartbeat_interval negative", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.HeartbeatInterval = durationpb.New(-time.Second) }), code: inval, reason: "INVALID_ARGUMENT", field: "heartbeat_interval"},
		{name: "heartbeat_interval 1ms", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.HeartbeatInterval = durationpb.New(time.Millisecond) }), code: inval, reason: "INVALID_ARGUMENT", field: "heartbeat_interval"},
		{name: "heartbeat_interval 2h", req: wr(func(r *savepointv1.WatchSessionsRequest) { r.HeartbeatInterval = durationpb.New(2 * time.Hour) }), code: inval, reason: "INVALID_ARGUMENT", field: "heartbeat_interval"},
		{name: "heartbeat_interval with mixed signs", req: wr(func(r *savepointv1.WatchSessionsRequest) {
			r.HeartbeatInterval = &durationpb.Duration{Seconds: 5, Nanos: -1}
		}), code: inval, reason: "INVALID_ARGUMENT", field: "heartbeat_interval"},
	}

	cases["Backup"] = []badCase{
		{name: "plaintext not accepted", req: &savepointv1.BackupRequest{}, code: codes.FailedPrecondition, reason: "PLAINTEXT_BACKUP"},
		{name: "plaintext not accepted, since a version", req: &savepointv1.BackupRequest{SinceVersion: math.MaxUint64}, code: codes.FailedPrecondition, reason: "PLAINTEXT_BACKUP"},
	}

	// ForkSession.
	fk := func(src string, rev uint64, dst, rid string) *savepointv1.ForkSessionRequest {
		return &savepointv1.ForkSessionRequest{SourceSessionId: src, Revision: rev, NewSessionId: dst, RequestId: rid}
	}
	fc := []badCase{{name: "empty request", req: &savepointv1.ForkSessionRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: "source_session_id"}}
	for _, b := range badSessionIDs {
		fc = append(fc,
			badCase{name: "source " + b.name, req: fk(b.id, 0, "new", ""), code: inval, reason: "INVALID_SESSION_ID", field: "source_session_id"},
			badCase{name: "new " + b.name, req: fk("alpha", 0, b.id, ""), code: inval, reason: "INVALID_SESSION_ID", field: "new_session_id"})
	}
	fc = append(fc,
		badCase{name: "source_session_id invalid UTF-8", req: fk("a"+utf8Hole, 0, "new", ""), invalidUTF8: true, code: inval, reason: utf8Reason, field: "source_session_id"},
		badCase{name: "new_session_id invalid UTF-8", req: fk("alpha", 0, "n"+utf8Hole, ""), invalidUTF8: true, code: inval, reason: utf8Reason, field: "new_session_id"},
		badCase{name: "new_session_id the source's", req: fk("alpha", 0, "alpha", ""), code: inval, reason: "INVALID_SESSION_ID", field: "new_session_id"},
		badCase{name: "request_id not a UUID", req: fk("alpha", 0, "new", "retry-1"), code: inval, reason: "INVALID_REQUEST_ID", field: "request_id"},
		badCase{name: "source unknown", req: fk("nobody", 0, "new", ""), code: notFnd, reason: "SESSION_NOT_FOUND"},
		badCase{name: "source deleted", req: fk("gone", 0, "new", ""), code: notFnd, reason: "SESSION_NOT_FOUND"},
		badCase{name: "revision above the latest", req: fk("alpha", 3, "new", ""), code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
		badCase{name: "new session exists", req: fk("alpha", 1, "beta", ""), code: codes.AlreadyExists, reason: "SESSION_EXISTS", state: true},
		badCase{name: "request_id of the new session's save, another payload", req: fk("beta", 1, "alpha", fx.alphaReqID), code: inval, reason: "REQUEST_ID_REUSED"},
	)
	cases["ForkSession"] = fc

	// RewindSession.
	rw := func(s string, epoch, rev uint64, rid string) *savepointv1.RewindSessionRequest {
		return &savepointv1.RewindSessionRequest{SessionId: s, Epoch: epoch, Revision: rev, RequestId: rid}
	}
	cases["RewindSession"] = append(append([]badCase{{name: "empty request", req: &savepointv1.RewindSessionRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return rw(id, 2, 1, "") }, sessionNotFound)...),
		badCase{name: "revision 0", req: rw("beta", 2, 0, ""), code: inval, reason: "MISSING_FIELD", field: "revision"},
		badCase{name: "request_id not a UUID", req: rw("beta", 2, 1, "retry-1"), code: inval, reason: "INVALID_REQUEST_ID", field: "request_id"},
		badCase{name: "request_id invalid UTF-8", req: rw("beta", 2, 1, utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "request_id"},
		badCase{name: "request_id of a save", req: rw("alpha", 1, 1, fx.alphaReqID), code: inval, reason: "REQUEST_ID_REUSED"},
		badCase{name: "revision above the latest", req: rw("beta", 2, 6, ""), code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
		badCase{name: "revision max uint64", req: rw("beta", 2, math.MaxUint64, ""), code: notFnd, reason: "REVISION_NOT_FOUND", state: true},
		badCase{name: "stale epoch", req: rw("beta", 1, 1, ""), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch 0 on a resumed session", req: rw("beta", 0, 1, ""), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch from the future", req: rw("alpha", 2, 1, ""), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "completed session", req: rw("done", 1, 1, ""), code: codes.FailedPrecondition, reason: "SESSION_COMPLETED", state: true},
	)

	// ListEffects.
	le := func(s string, size int32, token string) *savepointv1.ListEffectsRequest {
		return &savepointv1.ListEffectsRequest{SessionId: s, PageSize: size, PageToken: token}
	}
	cases["ListEffects"] = append(append([]badCase{{name: "empty request", req: &savepointv1.ListEffectsRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return le(id, 0, "") }, sessionNotFound)...),
		badCase{name: "page_size -1", req: le("beta", -1, ""), code: inval, reason: "INVALID_PAGE_SIZE", field: "page_size"},
		badCase{name: "garbage page_token", req: le("beta", 0, "garbage!"), code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "page_token of 10 KB", req: le("beta", 0, strings.Repeat("A", 10<<10)), code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "page_token invalid UTF-8", req: le("beta", 0, utf8Hole), invalidUTF8: true, code: inval, reason: utf8Reason, field: "page_token"},
		badCase{name: "page_token of another session", req: le("alpha", 0, fx.effectsToken), code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "page_token truncated", req: le("beta", 0, fx.effectsToken[:len(fx.effectsToken)-2]), code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "ListMessages page_token", req: le("beta", 0, fx.betaToken), code: inval, reason: "INVALID_PAGE_TOKEN"},
		badCase{name: "ListSessions page_token", req: le("beta", 0, fx.sessToken), code: inval, reason: "INVALID_PAGE_TOKEN"},
	)

	// DeleteSession.
	del := func(s string, epoch uint64) *savepointv1.DeleteSessionRequest {
		return &savepointv1.DeleteSessionRequest{SessionId: s, Epoch: epoch}
	}
	cases["DeleteSession"] = append(append([]badCase{{name: "empty request", req: &savepointv1.DeleteSessionRequest{}, code: inval, reason: "INVALID_SESSION_ID", field: sid}},
		perSession(func(id string) proto.Message { return del(id, 2) }, sessionNotFound)...),
		badCase{name: "stale epoch", req: del("beta", 1), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch 0 on a resumed session", req: del("beta", 0), code: codes.Aborted, reason: fenced, state: true},
		badCase{name: "epoch from the future", req: del("alpha", 2), code: codes.Aborted, reason: fenced, state: true},
	)

	// Verify has no fields: a request carrying unknown ones is answered
	// normally (proto3 ignores them) and writes nothing.
	cases["Verify"] = []badCase{
		{name: "unknown fields", req: padded((&savepointv1.VerifyRequest{}).ProtoReflect().Descriptor(), 10<<10), code: codes.OK},
	}
	// GetServerInfo has no fields either: unknown ones are ignored, and it
	// writes nothing (the snapshot check after each case shows it).
	cases["GetServerInfo"] = []badCase{
		{name: "unknown fields", req: padded((&savepointv1.GetServerInfoRequest{}).ProtoReflect().Descriptor(), 10<<10), code: codes.OK},
	}
	return cases
}

// paddedTo returns an empty request of type md that is n bytes on the wire,
// all of them an unknown field.
func paddedTo(md protoreflect.MessageDescriptor, n int) proto.Message {
	return padTo(padded(md, 0), n)
}

// padded returns an empty request of type md carrying an unknown field of n
// bytes.
func padded(md protoreflect.MessageDescriptor, n int) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		panic(err)
	}
	m := mt.New()
	if n > 0 {
		b := protowire.AppendTag(nil, 1000, protowire.BytesType)
		b = protowire.AppendBytes(b, bytes.Repeat([]byte{'p'}, n))
		m.SetUnknown(b)
	}
	return m.Interface()
}

// invoke calls method m with bc's request through conn.
func invoke(t *testing.T, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, bc badCase) error {
	t.Helper()
	full := fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
	if bc.invalidUTF8 {
		return rawInvoke(conn, full, marshalBroken(t, bc.req))
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return conn.Invoke(ctx, full, bc.req, mt.New().Interface())
}

// checkStatus checks err against bc's code, reason and metadata.
func checkStatus(t *testing.T, err error, bc badCase) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != bc.code {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, bc.code)
	}
	var infos []*errdetails.ErrorInfo
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, info)
		} else {
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	if bc.code == codes.OK || bc.noInfo {
		if len(infos) != 0 {
			t.Fatalf("ErrorInfo %v, want none", infos)
		}
		return
	}
	if len(infos) != 1 {
		t.Fatalf("%d ErrorInfo details in %v, want 1", len(infos), err)
	}
	info := infos[0]
	if info.Domain != rpc.ErrorDomain || info.Reason != bc.reason {
		t.Fatalf("ErrorInfo %s/%s (%v), want %s/%s", info.Domain, info.Reason, err, rpc.ErrorDomain, bc.reason)
	}
	if want := rpc.Reasons()[bc.reason]; want != bc.code {
		t.Errorf("the reasons table gives %s code %v, the case expects %v", bc.reason, want, bc.code)
	}
	if st.Message() == "" || len(st.Message()) > 1024 {
		t.Errorf("message of %d bytes: %q", len(st.Message()), st.Message())
	}
	if bc.field != "" && info.Metadata["field"] != bc.field {
		t.Errorf("field %q, want %q", info.Metadata["field"], bc.field)
	}
	for k, v := range bc.md {
		if got, ok := info.Metadata[k]; !ok || got != v {
			t.Errorf("metadata %s = %q, want %q (metadata %v)", k, got, v, info.Metadata)
		}
	}
	if bc.state && (info.Metadata["current_revision"] == "" || info.Metadata["current_epoch"] == "") {
		t.Errorf("metadata %v lacks current_revision and current_epoch", info.Metadata)
	}
}

// takeSnapshot reads the whole store through the public API: every page of
// ListSessions, every revision of every session with all its messages, each
// session's Reconcile, and the recorded effects of probes (recorded again,
// which a repeat makes a read). An error is kept in the snapshot as its
// status.
func takeSnapshot(t *testing.T, c sp, probes []*savepointv1.RecordEffectRequest) []proto.Message {
	t.Helper()
	var snap []proto.Message
	add := func(m proto.Message, err error) bool {
		if err != nil {
			snap = append(snap, status.Convert(err).Proto())
			return false
		}
		snap = append(snap, m)
		return true
	}
	var sums []*savepointv1.SessionSummary
	for token := ""; ; {
		ls, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 1, PageToken: token})
		if !add(ls, err) {
			break
		}
		sums = append(sums, ls.Sessions...)
		if token = ls.NextPageToken; token == "" {
			break
		}
	}
	for _, s := range sums {
		for rev := uint64(1); rev <= s.Revision; rev++ {
			add(c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: s.SessionId, Revision: proto.Uint64(rev)}))
			for token, first := "", true; first || token != ""; first = false {
				lm, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: s.SessionId, Revision: rev, PageSize: 2, PageToken: token})
				if !add(lm, err) {
					break
				}
				token = lm.NextPageToken
			}
		}
		add(c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.SessionId}))
		for token, first := "", true; first || token != ""; first = false {
			le, err := c.ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: s.SessionId, PageSize: 1, PageToken: token})
			if !add(le, err) {
				break
			}
			token = le.NextPageToken
		}
	}
	for _, p := range probes {
		r, err := c.RecordEffect(ctx, p)
		if err == nil && !r.AlreadyRecorded {
			t.Errorf("probe %s/%s was not recorded: the snapshot recorded it", p.SessionId, p.ToolUseId)
		}
		add(r, err)
	}
	return snap
}

// sameSnapshot reports whether a and b are equal, failing the test with the
// first difference when they are not.
func sameSnapshot(t *testing.T, a, b []proto.Message) bool {
	t.Helper()
	for i := range min(len(a), len(b)) {
		if !proto.Equal(a[i], b[i]) {
			t.Errorf("the store changed: item %d was\n%s\nand is\n%s", i, prototext.Format(a[i]), prototext.Format(b[i]))
			return false
		}
	}
	if len(a) != len(b) {
		t.Errorf("the store changed: %d items read before, %d after", len(a), len(b))
		return false
	}
	return true
}

// panickyStore panics on every call: its embedded Store is nil.
type panickyStore struct{ core.Store }

// TestHandlerPanic complements TestRunRecoversPanics (which checks the code
// and that the daemon still serves): a panic in any handler reaches the
// client as INTERNAL with reason INTERNAL and a generic message that leaks
// nothing of the panic, the daemon logs it with its stack, and it keeps
// serving other calls.
func TestHandlerPanic(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	sock := daemontest.SocketPath(t)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Config{Listen: "unix:" + sock}, panickyStore{}, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := daemontest.WaitServing(sock, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	c := dialAgent(t, sock)
	calls := map[string]func() error{
		"SaveCheckpoint": func() error {
			_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s"})
			return err
		},
		"Resume":       func() error { _, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "s"}); return err },
		"ListSessions": func() error { _, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{}); return err },
		"Verify":       func() error { _, err := c.Verify(ctx, &savepointv1.VerifyRequest{}); return err },
		"GetServerInfo": func() error {
			_, err := c.GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		checkStatus(t, err, badCase{code: codes.Internal, reason: rpc.ReasonInternal})
		if msg := status.Convert(err).Message(); strings.Contains(msg, "nil pointer") || strings.Contains(msg, "panic") || strings.Contains(msg, ".go:") {
			t.Errorf("%s: the panic reached the client: %q", name, msg)
		}
	}
	// Still serving: validation answers, and the health service.
	_, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "a/b"})
	checkStatus(t, err, badCase{code: codes.InvalidArgument, reason: "INVALID_SESSION_ID", field: "session_id"})
	if err := daemontest.WaitServing(sock, time.Second, nil); err != nil {
		t.Fatalf("health after the panics: %v", err)
	}
	out := logs.String()
	if n := strings.Count(out, "panic in handler"); n != len(calls) {
		t.Errorf("%d panic log lines for %d panics:\n%s", n, len(calls), out)
	}
	if !strings.Contains(out, "nil pointer") || !strings.Contains(out, "goroutine") {
		t.Errorf("the panic log lacks the panic value or its stack:\n%s", out)
	}
}
