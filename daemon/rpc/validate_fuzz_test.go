package rpc

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The documented invariants (docs/api.md), written independently of
// validate.go: an accepted request satisfies every one, a refused one breaks
// at least one.
var (
	docSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	docLabelKey  = regexp.MustCompile(`^[a-z0-9_.-]{1,63}$`)
)

func docToolUseIDOK(id string) bool {
	return id != "" && len(id) <= 512 && utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

func docLabelsOK(labels map[string]string) bool {
	if len(labels) > 64 {
		return false
	}
	for k, v := range labels {
		if !docLabelKey.MatchString(k) || len(v) > 256 {
			return false
		}
	}
	return true
}

// docJSONOK: empty passes unless required; otherwise JSON text.
func docJSONOK(s string, required bool) bool {
	if s == "" {
		return !required
	}
	return json.Valid([]byte(s))
}

// fuzzCfg has small limits so that the fuzzer reaches them.
var fuzzCfg = Limits{MaxMessageBytes: 64, MaxStateBytes: 48, ResponseBudgetBytes: 1024}.WithDefaults()

// checkRefusal checks that err is a field error the service can return.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var fe *fieldError
	if !errors.As(err, &fe) {
		t.Fatalf("refused with %T %v, want a *fieldError", err, err)
	}
	if Reasons()[wire(fe.Reason)] != codes.InvalidArgument || fe.Field == "" || fe.Msg == "" {
		t.Fatalf("field error %+v", fe)
	}
	st := ToStatus(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %v for %v", st.Code(), err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == wire(fe.Reason) && info.Metadata["field"] == fe.Field && info.Domain == ErrorDomain {
			return
		}
	}
	t.Fatalf("status %v lacks the ErrorInfo of %+v", st.Proto(), fe)
}

// FuzzValidateSaveCheckpoint checks validateSave on arbitrary field values:
// it never panics nor changes its input; it accepts exactly the requests
// that satisfy the documented invariants, returning them unchanged as a
// SaveRequest; and it refuses the others with an INVALID_ARGUMENT field
// error. shape picks the request's structure: bit 0 no message, bit 1 the
// message twice, bit 2 no tool use, bit 3 the tool use twice (a duplicate
// id), bit 4 a second tool use with id+"2", bit 5 labels, bit 6 keep_messages
// set, bit 7 the task repeated past 64 KiB.
func FuzzValidateSaveCheckpoint(f *testing.F) {
	f.Add("s1", "", "task", "user", `"hi"`, "t1", "w", `{}`, int32(3), true, `{"a":1}`, "team", "red", uint64(0), uint(0x20))
	f.Add("s1", "0F8FAD5B-D9CB-469F-A165-70867728950E", "", "assistant", `[{"type":"text"}]`, "toolu_01", "send", "", int32(1), false, "", "", "", uint64(7), uint(0x44))
	f.Add(".s", "x", "", "", "", "", "", "{", int32(99), false, "{", "K", "", uint64(0), uint(0))
	f.Add("a/b", "", "", "u", "nope", "t\x00", "", "", int32(-1), false, "", "", "", uint64(0), uint(0x08))
	f.Add("s", "", "", "u", `"`+strings.Repeat("x", 70)+`"`, "t\xff", "n", `[]`, int32(2), true, `"`+strings.Repeat("y", 50)+`"`, "k", strings.Repeat("v", 257), uint64(1), uint(0x3a))
	f.Add(strings.Repeat("s", 129), "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e", strings.Repeat("t", 600), "u", "1", strings.Repeat("i", 513), "n", `{}`, int32(0), false, "null", "a.b-c_d", "", uint64(0), uint(0x90))
	f.Fuzz(func(t *testing.T, sessionID, requestID, task, role, content, toolUseID, toolName, inputJSON string,
		effectClass int32, beginTracked bool, stateJSON, labelKey, labelValue string, keep uint64, shape uint) {
		if shape&0x80 != 0 {
			task = strings.Repeat(task+"t", maxTaskBytes/(len(task)+1)+1)
		}
		req := &savepointv1.SaveCheckpointRequest{
			SessionId: sessionID, ExpectedRevision: keep / 3, Epoch: keep / 5, RequestId: requestID,
			Task: task, Turn: uint32(keep), TokensUsed: keep, StateJson: stateJSON,
		}
		if shape&0x01 == 0 {
			req.AppendMessages = append(req.AppendMessages, &savepointv1.Message{Role: role, ContentJson: content})
			if shape&0x02 != 0 {
				req.AppendMessages = append(req.AppendMessages, &savepointv1.Message{Role: role, ContentJson: content})
			}
		}
		tu := &savepointv1.ToolUse{ToolUseId: toolUseID, Name: toolName, InputJson: inputJSON,
			EffectClass: savepointv1.EffectClass(effectClass), BeginTracked: beginTracked}
		if shape&0x04 == 0 {
			req.PendingToolUses = append(req.PendingToolUses, tu)
			if shape&0x08 != 0 {
				req.PendingToolUses = append(req.PendingToolUses, proto.CloneOf(tu))
			}
			if shape&0x10 != 0 {
				t2 := proto.CloneOf(tu)
				t2.ToolUseId += "2"
				req.PendingToolUses = append(req.PendingToolUses, t2)
			}
		}
		if shape&0x20 != 0 {
			req.Labels = map[string]string{labelKey: labelValue}
		}
		if shape&0x40 != 0 {
			req.KeepMessages = proto.Uint64(keep)
		}
		orig := proto.CloneOf(req)

		sr, err := validateSave(fuzzCfg, req)

		if !proto.Equal(req, orig) {
			t.Fatalf("validateSave changed its input")
		}
		// The documented invariants.
		var why []string
		check := func(ok bool, what string) {
			if !ok {
				why = append(why, what)
			}
		}
		check(docSessionID.MatchString(req.SessionId), "session_id")
		_, uerr := uuid.Parse(req.RequestId)
		check(req.RequestId == "" || uerr == nil, "request_id")
		check(len(req.Task) <= 64<<10, "task")
		check(len(req.AppendMessages) <= 1000, "messages per save")
		check(len(req.PendingToolUses) <= 256, "tool uses per save")
		for _, m := range req.AppendMessages {
			check(m.Role != "" && len(m.Role) <= 256, "role")
			check(len(m.ContentJson) <= fuzzCfg.MaxMessageBytes, "content_json size")
			check(docJSONOK(m.ContentJson, true), "content_json")
		}
		ids := map[string]bool{}
		for _, p := range req.PendingToolUses {
			check(docToolUseIDOK(p.ToolUseId), "tool_use_id")
			check(!ids[p.ToolUseId], "duplicate tool_use_id")
			ids[p.ToolUseId] = true
			check(p.Name != "" && len(p.Name) <= 256, "name")
			check(len(p.InputJson) <= fuzzCfg.MaxStateBytes, "input_json size")
			check(docJSONOK(p.InputJson, false), "input_json")
			check(p.EffectClass >= 0 && p.EffectClass <= 3, "effect_class")
		}
		check(len(req.StateJson) <= fuzzCfg.MaxStateBytes, "state_json size")
		check(docJSONOK(req.StateJson, false), "state_json")
		check(docLabelsOK(req.Labels), "labels")

		if err != nil {
			checkRefusal(t, err)
			if len(why) == 0 {
				// Only the response budget is left to explain the refusal.
				var fe *fieldError
				errors.As(err, &fe)
				if fe.Reason != reasonFieldTooLarge || fe.Field != "pending_tool_uses" {
					t.Fatalf("refused a request that meets every documented invariant: %v", err)
				}
			}
			return
		}
		if len(why) > 0 {
			t.Fatalf("accepted a request that breaks %v", why)
		}
		if sr == nil {
			t.Fatal("accepted with a nil SaveRequest")
		}
		if n := fixedSize(sr.Task, sr.StateJSON, sr.Labels, sr.PendingToolUses); n > fuzzCfg.ResponseBudgetBytes {
			t.Fatalf("accepted a checkpoint of %d bytes without messages, over the %d-byte budget", n, fuzzCfg.ResponseBudgetBytes)
		}
		// Accepted: the SaveRequest carries the request unchanged.
		if sr.SessionID != req.SessionId || sr.ExpectedRevision != req.ExpectedRevision || sr.Epoch != req.Epoch ||
			sr.Task != req.Task || sr.Turn != req.Turn || sr.TokensUsed != req.TokensUsed || sr.StateJSON != req.StateJson {
			t.Fatalf("SaveRequest %+v differs from the request", sr)
		}
		if req.RequestId == "" && sr.RequestID != "" || req.RequestId != "" && sr.RequestID != uuid.MustParse(req.RequestId).String() {
			t.Fatalf("request id %q became %q", req.RequestId, sr.RequestID)
		}
		if (req.KeepMessages == nil) != (sr.KeepMessages == nil) || req.KeepMessages != nil && *req.KeepMessages != *sr.KeepMessages {
			t.Fatalf("keep_messages %v became %v", req.KeepMessages, sr.KeepMessages)
		}
		if len(sr.AppendMessages) != len(req.AppendMessages) || len(sr.PendingToolUses) != len(req.PendingToolUses) || len(sr.Labels) != len(req.Labels) {
			t.Fatalf("SaveRequest %+v lost or gained items", sr)
		}
		for i, m := range req.AppendMessages {
			if sr.AppendMessages[i] != (core.Message{Role: m.Role, ContentJSON: m.ContentJson}) {
				t.Fatalf("message %d became %+v", i, sr.AppendMessages[i])
			}
		}
		for i, p := range req.PendingToolUses {
			got := sr.PendingToolUses[i]
			wantClass := map[savepointv1.EffectClass]core.EffectClass{0: core.SideEffect, 1: core.ReadOnly, 2: core.Idempotent, 3: core.SideEffect}[p.EffectClass]
			if got.ID != p.ToolUseId || got.Name != p.Name || got.InputJSON != p.InputJson || got.BeginTracked != p.BeginTracked || got.Class != wantClass {
				t.Fatalf("tool use %d became %+v", i, got)
			}
		}
		for k, v := range req.Labels {
			if sr.Labels[k] != v {
				t.Fatalf("label %q became %q", k, sr.Labels[k])
			}
		}
	})
}

// FuzzValidateRecordEffect checks validateRecord on arbitrary field values:
// it never panics; it accepts exactly the requests that satisfy the
// documented invariants, returning their effect unchanged; and it refuses
// the others with an INVALID_ARGUMENT field error.
func FuzzValidateRecordEffect(f *testing.F) {
	f.Add("s1", "toolu_01", "", "done", false)
	f.Add("s1", "t/1:ü", "send_mail", "", true)
	f.Add("", "", "", "", false)
	f.Add("s1", "t\x00", "n", "x", false)
	f.Add("s1", "\xff", "n", "x", false)
	f.Add("-s", "t", strings.Repeat("n", 257), strings.Repeat("o", 65), true)
	f.Fuzz(func(t *testing.T, sessionID, toolUseID, name, output string, isError bool) {
		req := &savepointv1.RecordEffectRequest{SessionId: sessionID, ToolUseId: toolUseID, Name: name, Output: output, IsError: isError}
		orig := proto.CloneOf(req)

		e, err := validateRecord(fuzzCfg, req)

		if !proto.Equal(req, orig) {
			t.Fatalf("validateRecord changed its input")
		}
		ok := docSessionID.MatchString(sessionID) && docToolUseIDOK(toolUseID) && len(name) <= 256 && len(output) <= fuzzCfg.MaxMessageBytes
		if err != nil {
			checkRefusal(t, err)
			if ok {
				t.Fatalf("refused a request that meets every documented invariant: %v", err)
			}
			return
		}
		if !ok {
			t.Fatalf("accepted %q/%q name %d bytes, output %d bytes", sessionID, toolUseID, len(name), len(output))
		}
		if want := (core.Effect{ToolUseID: toolUseID, Name: name, Output: output, IsError: isError}); e != want {
			t.Fatalf("effect %+v, want %+v", e, want)
		}
	})
}
