package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// checkFieldErr fails unless err is a *fieldError with the given reason and
// field; reason 0 (UNSPECIFIED) wants no error.
func checkFieldErr(t *testing.T, err error, reason savepointv1.ErrorReason, field string) {
	t.Helper()
	if reason == 0 {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	var fe *fieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *fieldError %s", err, reason)
	}
	if fe.Reason != reason || (field != "" && fe.Field != field) {
		t.Fatalf("err = %s on %q, want %s on %q (%v)", fe.Reason, fe.Field, reason, field, err)
	}
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("%v does not wrap ErrInvalidArgument", err)
	}
	if code, ok := Reasons()[wire(fe.Reason)]; !ok || code != codes.InvalidArgument {
		t.Errorf("reason %s missing from Reasons()", fe.Reason)
	}
}

func TestValidateSessionID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"Task-1.retry_2:x", true},
		{"0", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"-a", false},
		{".a", false},
		{":a", false},
		{"_a", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		reason := reasonInvalidSessionID
		if tt.ok {
			reason = 0
		}
		checkFieldErr(t, validateSessionID("session_id", tt.id), reason, "session_id")
	}
}

func TestValidateToolUseID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"toolu_01", true},
		{"a/b:c 日本", true},
		{strings.Repeat("x", 512), true},
		{strings.Repeat("é", 256), true},
		{"", false},
		{strings.Repeat("x", 513), false},
		{"a\x00b", false},
		{"\xff", false},
	}
	for _, tt := range tests {
		reason := reasonInvalidToolUseID
		if tt.ok {
			reason = 0
		}
		checkFieldErr(t, validateToolUseID("tool_use_id", tt.id), reason, "tool_use_id")
	}
}

func TestValidateRequestID(t *testing.T) {
	tests := []struct {
		id, want string
		ok       bool
	}{
		{"", "", true},
		{"0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"0f8fad5b-d9cb-469f-a165-70867728950E", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"{0f8fad5b-d9cb-469f-a165-70867728950e}", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"0f8fad5bd9cb469fa16570867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"0f8fad5b-d9cb-469f-a165-70867728950g", "", false},
		{"retry-1", "", false},
		{"0f8fad5b-d9cb-469f-a165-70867728950", "", false},
	}
	for _, tt := range tests {
		got, err := validateRequestID("request_id", tt.id)
		reason := reasonInvalidRequestID
		if tt.ok {
			reason = 0
		}
		checkFieldErr(t, err, reason, "request_id")
		if got != tt.want {
			t.Errorf("validateRequestID(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestValidateLabels(t *testing.T) {
	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{"none", nil, true},
		{"good", map[string]string{"team": "a", "env.stage_1-x": "", strings.Repeat("k", 63): strings.Repeat("v", 256)}, true},
		{"empty key", map[string]string{"": "v"}, false},
		{"long key", map[string]string{strings.Repeat("k", 64): "v"}, false},
		{"upper key", map[string]string{"Team": "v"}, false},
		{"slash key", map[string]string{"a/b": "v"}, false},
		{"long value", map[string]string{"k": strings.Repeat("v", 257)}, false},
		{"too many", many, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason := reasonInvalidLabel
			if tt.ok {
				reason = 0
			}
			checkFieldErr(t, validateLabels("labels", tt.labels), reason, "labels")
		})
	}
}

func validSave() *savepointv1.SaveCheckpointRequest {
	return &savepointv1.SaveCheckpointRequest{
		SessionId: "s1",
		RequestId: "0f8fad5b-d9cb-469f-a165-70867728950e",
		Task:      "write a poem",
		AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `"hello"`},
			{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"t1"}]`},
		},
		PendingToolUses: []*savepointv1.ToolUse{
			{ToolUseId: "t1", Name: "send_email", InputJson: `{"to":"a"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true},
			{ToolUseId: "t2", Name: "read", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY},
		},
		StateJson: `{"step":3}`,
		Labels:    map[string]string{"team": "a"},
	}
}

func TestValidateSave(t *testing.T) {
	cfg := Limits{MaxMessageBytes: 100, MaxStateBytes: 50, ResponseBudgetBytes: 2000}.WithDefaults()
	tests := []struct {
		name   string
		edit   func(r *savepointv1.SaveCheckpointRequest)
		reason savepointv1.ErrorReason
		field  string
	}{
		{"valid", func(r *savepointv1.SaveCheckpointRequest) {}, 0, ""},
		{"no messages, state or labels", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages, r.PendingToolUses, r.StateJson, r.Labels, r.RequestId = nil, nil, "", nil, ""
		}, 0, ""},
		{"bad session", func(r *savepointv1.SaveCheckpointRequest) { r.SessionId = "a/b" }, reasonInvalidSessionID, "session_id"},
		{"bad request id", func(r *savepointv1.SaveCheckpointRequest) { r.RequestId = "1" }, reasonInvalidRequestID, "request_id"},
		{"task too large", func(r *savepointv1.SaveCheckpointRequest) { r.Task = strings.Repeat("t", 64<<10+1) }, reasonFieldTooLarge, "task"},
		{"too many messages", func(r *savepointv1.SaveCheckpointRequest) {
			for range core.MaxAppendMessages {
				r.AppendMessages = append(r.AppendMessages, &savepointv1.Message{Role: "user", ContentJson: "1"})
			}
		}, reasonFieldTooLarge, "append_messages"},
		{"tool input too large", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses[0].InputJson = `"` + strings.Repeat("i", 50) + `"`
		}, reasonFieldTooLarge, "pending_tool_uses[0].input_json"},
		{"too many tool uses", func(r *savepointv1.SaveCheckpointRequest) {
			for i := range core.MaxPendingToolUses {
				r.PendingToolUses = append(r.PendingToolUses, &savepointv1.ToolUse{ToolUseId: fmt.Sprint("x", i), Name: "n"})
			}
		}, reasonFieldTooLarge, "pending_tool_uses"},
		{"missing role", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[1].Role = "" }, reasonMissingField, "append_messages[1].role"},
		{"role too large", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].Role = strings.Repeat("r", 257) }, reasonFieldTooLarge, "append_messages[0].role"},
		{"empty content", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].ContentJson = "" }, reasonInvalidJSON, "append_messages[0].content_json"},
		{"bad content", func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[1].ContentJson = "{" }, reasonInvalidJSON, "append_messages[1].content_json"},
		{"message too large", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages[0].ContentJson = `"` + strings.Repeat("x", 99) + `"`
		}, reasonMessageTooLarge, "append_messages[0].content_json"},
		{"message at limit", func(r *savepointv1.SaveCheckpointRequest) {
			r.AppendMessages[0].ContentJson = `"` + strings.Repeat("x", 98) + `"`
		}, 0, ""},
		{"bad tool use id", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[1].ToolUseId = "" }, reasonInvalidToolUseID, "pending_tool_uses[1].tool_use_id"},
		{"missing tool name", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[0].Name = "" }, reasonMissingField, "pending_tool_uses[0].name"},
		{"tool name too large", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[0].Name = strings.Repeat("n", 257) }, reasonFieldTooLarge, "pending_tool_uses[0].name"},
		{"bad input", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[0].InputJson = "nope" }, reasonInvalidJSON, "pending_tool_uses[0].input_json"},
		{"bad effect class", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[1].EffectClass = 9 }, reasonInvalidEffectClass, "pending_tool_uses[1].effect_class"},
		{"duplicate tool use", func(r *savepointv1.SaveCheckpointRequest) { r.PendingToolUses[1].ToolUseId = "t1" }, reasonDuplicateToolUseID, "pending_tool_uses[1].tool_use_id"},
		{"bad state", func(r *savepointv1.SaveCheckpointRequest) { r.StateJson = "{'a':1}" }, reasonInvalidJSON, "state_json"},
		{"state too large", func(r *savepointv1.SaveCheckpointRequest) { r.StateJson = `"` + strings.Repeat("s", 49) + `"` }, reasonStateTooLarge, "state_json"},
		{"bad label", func(r *savepointv1.SaveCheckpointRequest) { r.Labels = map[string]string{"A": ""} }, reasonInvalidLabel, "labels"},
		{"pending over budget", func(r *savepointv1.SaveCheckpointRequest) {
			r.PendingToolUses = nil // each input under its own cap, together over the budget
			for i := range 50 {
				r.PendingToolUses = append(r.PendingToolUses, &savepointv1.ToolUse{ToolUseId: fmt.Sprint("p", i), Name: "n", InputJson: `"` + strings.Repeat("i", 40) + `"`})
			}
		}, reasonFieldTooLarge, "pending_tool_uses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validSave()
			tt.edit(req)
			_, err := validateSave(cfg, req)
			checkFieldErr(t, err, tt.reason, tt.field)
		})
	}
}

func TestValidateSaveConverts(t *testing.T) {
	req := validSave()
	req.RequestId = strings.ToUpper(req.RequestId)
	req.ExpectedRevision, req.Epoch, req.Turn, req.TokensUsed = 4, 2, 7, 1234
	req.KeepMessages = proto.Uint64(3)
	req.PendingToolUses[1].EffectClass = savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED
	got, err := validateSave(DefaultLimits(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionID != "s1" || got.ExpectedRevision != 4 || got.Epoch != 2 || got.Turn != 7 || got.TokensUsed != 1234 ||
		got.Task != "write a poem" || got.StateJSON != `{"step":3}` || got.Labels["team"] != "a" {
		t.Errorf("scalars not carried over: %+v", got)
	}
	if got.RequestID != "0f8fad5b-d9cb-469f-a165-70867728950e" {
		t.Errorf("request id = %q, want the canonical form", got.RequestID)
	}
	if got.KeepMessages == nil || *got.KeepMessages != 3 {
		t.Errorf("keep_messages = %v, want 3", got.KeepMessages)
	}
	if len(got.AppendMessages) != 2 || got.AppendMessages[1] != (core.Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"t1"}]`}) {
		t.Errorf("messages = %+v", got.AppendMessages)
	}
	want := []core.ToolUse{
		{ID: "t1", Name: "send_email", InputJSON: `{"to":"a"}`, Class: core.SideEffect, BeginTracked: true},
		{ID: "t2", Name: "read", Class: core.SideEffect},
	}
	if len(got.PendingToolUses) != 2 || got.PendingToolUses[0] != want[0] || got.PendingToolUses[1] != want[1] {
		t.Errorf("pending = %+v, want %+v", got.PendingToolUses, want)
	}
}

func TestEffectClassFromProto(t *testing.T) {
	tests := []struct {
		in   savepointv1.EffectClass
		want core.EffectClass
		ok   bool
	}{
		{savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, core.SideEffect, true},
		{savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY, core.ReadOnly, true},
		{savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT, core.Idempotent, true},
		{savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, core.SideEffect, true},
		{4, 0, false},
		{-1, 0, false},
	}
	for _, tt := range tests {
		got, ok := effectClassFromProto(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("effectClassFromProto(%v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && tt.in != savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED && effectClassToProto(got) != tt.in {
			t.Errorf("effectClassToProto(%v) = %v, want %v", got, effectClassToProto(got), tt.in)
		}
	}
}

func TestValidateRecord(t *testing.T) {
	cfg := Limits{MaxMessageBytes: 10}.WithDefaults()
	tests := []struct {
		name   string
		req    *savepointv1.RecordEffectRequest
		reason savepointv1.ErrorReason
		field  string
	}{
		{"valid", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t", Name: "n", Output: "0123456789", IsError: true}, 0, ""},
		{"empty name", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t"}, 0, ""},
		{"bad session", &savepointv1.RecordEffectRequest{SessionId: "", ToolUseId: "t"}, reasonInvalidSessionID, "session_id"},
		{"bad tool use", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "\x00"}, reasonInvalidToolUseID, "tool_use_id"},
		{"long name", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t", Name: strings.Repeat("n", 257)}, reasonFieldTooLarge, "name"},
		{"long output", &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t", Output: "01234567890"}, reasonFieldTooLarge, "output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := validateRecord(cfg, tt.req)
			checkFieldErr(t, err, tt.reason, tt.field)
			if err == nil && (e.ToolUseID != tt.req.ToolUseId || e.Name != tt.req.Name || e.Output != tt.req.Output || e.IsError != tt.req.IsError) {
				t.Errorf("effect = %+v, from %v", e, tt.req)
			}
		})
	}
}

func TestValidateOtherRequests(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason savepointv1.ErrorReason
		field  string
	}{
		{"begin", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t"}), 0, ""},
		{"begin bad session", beginErr(&savepointv1.BeginEffectRequest{SessionId: "-", ToolUseId: "t"}), reasonInvalidSessionID, "session_id"},
		{"begin bad tool use", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s"}), reasonInvalidToolUseID, "tool_use_id"},
		{"register", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{Name: "w"}, RequestId: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"}), 0, ""},
		{"register other id", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{ToolUseId: "u", Name: "w"}}), reasonToolUseIDMismatch, "tool_use.tool_use_id"},
		{"register no name", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{}}), reasonMissingField, "tool_use.name"},
		{"register bad input", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{Name: "w", InputJson: "{"}}), reasonInvalidJSON, "tool_use.input_json"},
		{"register bad class", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{Name: "w", EffectClass: 9}}), reasonInvalidEffectClass, "tool_use.effect_class"},
		{"register bad request id", beginErr(&savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t", ToolUse: &savepointv1.ToolUse{Name: "w"}, RequestId: "x"}), reasonInvalidRequestID, "request_id"},
		{"reconcile ids", validateReconcile(&savepointv1.ReconcileRequest{SessionId: "s", ToolUseIds: []string{"a", "b"}}), 0, ""},
		{"reconcile duplicate id", validateReconcile(&savepointv1.ReconcileRequest{SessionId: "s", ToolUseIds: []string{"a", "a"}}), reasonDuplicateToolUseID, "tool_use_ids[1]"},
		{"reconcile empty id", validateReconcile(&savepointv1.ReconcileRequest{SessionId: "s", ToolUseIds: []string{""}}), reasonInvalidToolUseID, "tool_use_ids[0]"},
		{"reconcile too many ids", validateReconcile(&savepointv1.ReconcileRequest{SessionId: "s", ToolUseIds: manyIDs(257)}), reasonInvalidArgument, "tool_use_ids"},
		{"list messages", validateListMessages(&savepointv1.ListMessagesRequest{SessionId: "s", PageSize: 5}), 0, ""},
		{"list messages bad session", validateListMessages(&savepointv1.ListMessagesRequest{}), reasonInvalidSessionID, "session_id"},
		{"list messages negative", validateListMessages(&savepointv1.ListMessagesRequest{SessionId: "s", PageSize: -1}), reasonInvalidPageSize, "page_size"},
		{"list sessions", listErr(&savepointv1.ListSessionsRequest{PageSize: 5000, LabelFilter: map[string]string{"a": "b"}}), 0, ""},
		{"list sessions negative", listErr(&savepointv1.ListSessionsRequest{PageSize: -1}), reasonInvalidPageSize, "page_size"},
		{"list sessions bad filter", listErr(&savepointv1.ListSessionsRequest{LabelFilter: map[string]string{"A": ""}}), reasonInvalidLabel, "label_filter"},
		{"list sessions bad status", listErr(&savepointv1.ListSessionsRequest{StatusFilter: 9}), reasonInvalidSessionStatus, "status_filter"},
		{"list sessions negative idle", listErr(&savepointv1.ListSessionsRequest{MinIdle: durationpb.New(-time.Second)}), reasonInvalidArgument, "min_idle"},
		{"list sessions invalid idle", listErr(&savepointv1.ListSessionsRequest{MinIdle: &durationpb.Duration{Seconds: 1, Nanos: -1}}), reasonInvalidArgument, "min_idle"},
		{"list effects", validateListEffects(&savepointv1.ListEffectsRequest{SessionId: "s", PageSize: 5}), 0, ""},
		{"list effects bad session", validateListEffects(&savepointv1.ListEffectsRequest{}), reasonInvalidSessionID, "session_id"},
		{"list effects negative", validateListEffects(&savepointv1.ListEffectsRequest{SessionId: "s", PageSize: -1}), reasonInvalidPageSize, "page_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkFieldErr(t, tt.err, tt.reason, tt.field) })
	}
}

func listErr(req *savepointv1.ListSessionsRequest) error {
	_, err := validateListSessions(req, time.Now())
	return err
}

func TestValidateListSessionsFilter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f, err := validateListSessions(&savepointv1.ListSessionsRequest{
		LabelFilter: map[string]string{"team": "a"}, StatusFilter: savepointv1.SessionStatus_SESSION_STATUS_FAILED,
		HasPendingToolUses: true, MinIdle: durationpb.New(90 * time.Minute),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.Labels["team"] != "a" || f.Status != core.StatusFailed || !f.HasPendingToolUses || !f.UpdatedBefore.Equal(now.Add(-90*time.Minute)) {
		t.Errorf("filter = %+v", f)
	}
	f, err = validateListSessions(&savepointv1.ListSessionsRequest{MinIdle: durationpb.New(0)}, now)
	if err != nil || !f.UpdatedBefore.IsZero() || f.Status != core.StatusAny {
		t.Errorf("zero min_idle: filter = %+v, %v", f, err)
	}
}

func TestValidateComplete(t *testing.T) {
	cfg := Limits{}.WithDefaults()
	ok := func() *savepointv1.CompleteSessionRequest {
		return &savepointv1.CompleteSessionRequest{SessionId: "s", Epoch: 3, Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED,
			FinalOutput: "done", RequestId: "3F2504E0-4F89-11D3-9A0C-0305E82C3301"}
	}
	tests := []struct {
		name   string
		edit   func(r *savepointv1.CompleteSessionRequest)
		reason savepointv1.ErrorReason
		field  string
	}{
		{"valid", func(*savepointv1.CompleteSessionRequest) {}, 0, ""},
		{"failed", func(r *savepointv1.CompleteSessionRequest) {
			r.Status = savepointv1.SessionStatus_SESSION_STATUS_FAILED
		}, 0, ""},
		{"bad session", func(r *savepointv1.CompleteSessionRequest) { r.SessionId = "" }, reasonInvalidSessionID, "session_id"},
		{"bad request id", func(r *savepointv1.CompleteSessionRequest) { r.RequestId = "x" }, reasonInvalidRequestID, "request_id"},
		{"unspecified status", func(r *savepointv1.CompleteSessionRequest) { r.Status = 0 }, reasonInvalidSessionStatus, "status"},
		{"active status", func(r *savepointv1.CompleteSessionRequest) {
			r.Status = savepointv1.SessionStatus_SESSION_STATUS_ACTIVE
		}, reasonInvalidSessionStatus, "status"},
		{"unknown status", func(r *savepointv1.CompleteSessionRequest) { r.Status = 42 }, reasonInvalidSessionStatus, "status"},
		{"output too large", func(r *savepointv1.CompleteSessionRequest) { r.FinalOutput = strings.Repeat("x", cfg.MaxStateBytes+1) }, reasonFieldTooLarge, "final_output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ok()
			tt.edit(req)
			cr, err := validateComplete(cfg, req)
			checkFieldErr(t, err, tt.reason, tt.field)
			if err == nil && (cr.SessionID != "s" || cr.Epoch != 3 || cr.FinalOutput != req.FinalOutput ||
				cr.RequestID != "3f2504e0-4f89-11d3-9a0c-0305e82c3301" || statusToProto(cr.Status) != req.Status) {
				t.Errorf("request = %+v, from %v", cr, req)
			}
		})
	}
}

// beginErr is validateBegin's error.
func beginErr(req *savepointv1.BeginEffectRequest) error {
	_, err := validateBegin(DefaultLimits(), req)
	return err
}

func manyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("t", i)
	}
	return ids
}
