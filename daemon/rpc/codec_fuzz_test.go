package rpc

import (
	"errors"
	"maps"
	"testing"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// fuzzSave is a SaveCheckpointRequest put on the wire by hand, so that its
// strings may be any bytes, in the reverse of declaration order, so that
// "first" is checked to mean declared first, not sent first.
func fuzzSave(sessionID, role, content, toolUseID, labelKey, labelValue string) []byte {
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	msg := func(b []byte, num protowire.Number, body []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), body)
	}
	var b []byte
	b = msg(b, 12, str(str(nil, 1, labelKey), 2, labelValue))
	b = msg(b, 10, str(str(nil, 1, toolUseID), 2, "w"))
	b = msg(b, 9, str(str(nil, 1, role), 2, content))
	return str(b, 1, sessionID)
}

// FuzzRequestCodec checks requestCodec on two inputs. A save built from the
// fuzzed strings must be refused with INVALID_UTF8 naming exactly the first
// declared string that is not UTF-8, or be decoded unchanged when all are.
// Arbitrary bytes must never make Unmarshal fail (grpc-go would answer a bare
// INTERNAL) and must be refused exactly when proto.Unmarshal refuses them,
// with INVALID_ARGUMENT and a reason.
func FuzzRequestCodec(f *testing.F) {
	good, _ := proto.Marshal(validSave())
	f.Add("s1", "user", `"hi"`, "t1", "team", "red", good)
	f.Add("s\xff", "user", `"hi"`, "t1", "team", "red", good[:len(good)-1])
	f.Add("s1", "us\xc3(r", "\xff", "t1", "team", "red", []byte{0x0a, 0x02, 0xc3, 0x28})
	f.Add("s1", "user", `"hi"`, "t1\xed\xa0\x80", "\xff", "red", []byte{0x62, 0x04, 0x0a, 0x02, 0xff, 0xfe})
	f.Add("s1", "user", `"hi"`, "t1", "team", "r\x80d", []byte{0x4a, 0x03, 0x0a, 0x01, 0xff})
	f.Add("", "", "", "", "", "", []byte{0x00})
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, sessionID, role, content, toolUseID, labelKey, labelValue string, raw []byte) {
		c := newRequestCodec(limit)

		b := fuzzSave(sessionID, role, content, toolUseID, labelKey, labelValue)
		var want string
		for _, s := range []struct{ field, v string }{
			{"session_id", sessionID},
			{"append_messages[0].role", role},
			{"append_messages[0].content_json", content},
			{"pending_tool_uses[0].tool_use_id", toolUseID},
			{"labels", labelKey},
			{"labels", labelValue},
		} {
			if !utf8.ValidString(s.v) {
				want = s.field
				break
			}
		}
		m := &savepointv1.SaveCheckpointRequest{}
		err := decode(t, c, b, m)
		switch fe, _ := errors.AsType[*fieldError](err); {
		case len(b) > limit:
			if !errors.Is(err, ErrRequestTooLarge) {
				t.Fatalf("%d bytes over a %d-byte limit: refusal %v", len(b), limit, err)
			}
		case want != "":
			if fe == nil || fe.Reason != reasonInvalidUTF8 || fe.Field != want {
				t.Fatalf("refusal %v, want INVALID_UTF8 on %s", err, want)
			}
			checkCodecRefusal(t, err)
		case err != nil:
			t.Fatalf("valid UTF-8 refused: %v", err)
		default:
			if m.SessionId != sessionID || m.AppendMessages[0].GetRole() != role || m.AppendMessages[0].GetContentJson() != content ||
				m.PendingToolUses[0].GetToolUseId() != toolUseID || !maps.Equal(m.Labels, map[string]string{labelKey: labelValue}) {
				t.Fatalf("decoded %v", m)
			}
		}

		m = &savepointv1.SaveCheckpointRequest{}
		err = decode(t, c, raw, m)
		plain := &savepointv1.SaveCheckpointRequest{}
		perr := proto.Unmarshal(raw, plain)
		switch {
		case len(raw) > limit:
			if !errors.Is(err, ErrRequestTooLarge) {
				t.Fatalf("%d bytes over a %d-byte limit: refusal %v", len(raw), limit, err)
			}
		case perr == nil:
			if err != nil || !proto.Equal(m, plain) {
				t.Fatalf("proto.Unmarshal accepts %x, the codec gives %v, %v", raw, m, err)
			}
		default:
			if err == nil {
				t.Fatalf("proto.Unmarshal refuses %x (%v), the codec accepts it as %v", raw, perr, m)
			}
			checkCodecRefusal(t, err)
			if !proto.Equal(m, &savepointv1.SaveCheckpointRequest{}) {
				t.Fatalf("a refused request left %v", m)
			}
		}
	})
}

// checkCodecRefusal checks that a decode refusal becomes INVALID_ARGUMENT
// with an ErrorInfo: INVALID_UTF8 with a field, or INVALID_ARGUMENT.
func checkCodecRefusal(t *testing.T, err error) {
	t.Helper()
	st := ToStatus(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %v for %v", st.Code(), err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			switch info.Reason {
			case "INVALID_UTF8":
				if info.Metadata["field"] == "" {
					t.Fatalf("INVALID_UTF8 without a field: %v", st.Proto())
				}
			case "INVALID_ARGUMENT":
			default:
				t.Fatalf("reason %s for a request that does not decode", info.Reason)
			}
			return
		}
	}
	t.Fatalf("no ErrorInfo in %v", st.Proto())
}
