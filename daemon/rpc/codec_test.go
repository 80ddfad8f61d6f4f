package rpc

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// hole marks the string a test case breaks; breakUTF8 makes it invalid UTF-8
// of the same length.
const hole = "<<HOLE>>"

func breakUTF8(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(hole)) {
		t.Fatalf("%v holds no %q", m, hole)
	}
	bad := []byte(hole)
	bad[1], bad[2] = 0xc3, 0x28 // a lead byte without its continuation
	return bytes.ReplaceAll(b, []byte(hole), bad)
}

// decode runs b through a fresh codec of limit maxBytes into m and returns
// the refusal it kept, failing the test if Unmarshal itself failed.
func decode(t testing.TB, c *requestCodec, b []byte, m proto.Message) error {
	t.Helper()
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m); err != nil {
		t.Fatalf("Unmarshal: %v (a codec error is a bare INTERNAL)", err)
	}
	return c.refusal(m)
}

// testFile is a message type with what the service's requests lack: a map
// with message values, a map with integer keys, repeated strings, a oneof
// and a proto2 group.
var testFile = func() protoreflect.FileDescriptor {
	const text = `
name: "codectest.proto" package: "codectest" syntax: "proto3"
message_type {
  name: "Outer"
  field { name: "by_name" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".codectest.Outer.ByNameEntry" }
  field { name: "by_id" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".codectest.Outer.ByIdEntry" }
  field { name: "tags" number: 3 label: LABEL_REPEATED type: TYPE_STRING }
  field { name: "text" number: 4 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "blob" number: 5 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "inner" number: 6 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".codectest.Inner" }
  nested_type {
    name: "ByNameEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".codectest.Inner" }
  }
  nested_type {
    name: "ByIdEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  }
  oneof_decl { name: "choice" }
}
message_type {
  name: "Inner"
  field { name: "s" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "deeper" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".codectest.Inner" }
}`
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := prototext.Unmarshal([]byte(text), fdp); err != nil {
		panic(err)
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	return fd
}()

// outer builds a codectest.Outer from its text form.
func outer(t testing.TB, text string) proto.Message {
	t.Helper()
	m := dynamicpb.NewMessage(testFile.Messages().ByName("Outer"))
	if err := prototext.Unmarshal([]byte(text), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRequestCodecInvalidUTF8(t *testing.T) {
	tests := []struct {
		name  string
		msg   proto.Message
		field string
	}{
		{"top-level string", &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: hole}, "tool_use_id"},
		{"repeated message", &savepointv1.SaveCheckpointRequest{SessionId: "s",
			AppendMessages: []*savepointv1.Message{{Role: "user"}, {Role: "user", ContentJson: hole}}}, "append_messages[1].content_json"},
		{"map key", &savepointv1.ListSessionsRequest{LabelFilter: map[string]string{"a": "b", hole: "c"}}, "label_filter"},
		{"depth 3", &savepointv1.ReconcileResponse{Resolutions: []*savepointv1.Resolution{
			{ToolUse: &savepointv1.ToolUse{ToolUseId: "t0"}},
			{ToolUse: &savepointv1.ToolUse{ToolUseId: "t1"}, Effect: &savepointv1.Effect{Output: hole}},
		}}, "resolutions[1].effect.output"},
		{"depth 3, repeated", &savepointv1.ResumeResponse{Checkpoint: &savepointv1.Checkpoint{
			PendingToolUses: []*savepointv1.ToolUse{{Name: "a"}, {Name: "b"}, {Name: hole}}}}, "checkpoint.pending_tool_uses[2].name"},
		{"map in a nested message", &savepointv1.GetSessionResponse{Checkpoint: &savepointv1.Checkpoint{
			Labels: map[string]string{"team": hole}}}, "checkpoint.labels"},
		{"first in declaration order", &savepointv1.SaveCheckpointRequest{SessionId: "s" + hole, StateJson: hole}, "session_id"},
		{"map of messages", outer(t, `by_name { key: "k1" value { s: "ok" } } by_name { key: "k2" value { s: "`+hole+`" } }`), `by_name["k2"].s`},
		{"map of messages, deeper", outer(t, `by_name { key: "k" value { deeper { s: "ok" } deeper { deeper { s: "`+hole+`" } } } }`), `by_name["k"].deeper[1].deeper[0].s`},
		{"map with integer keys", outer(t, `by_id { key: 7 value: "`+hole+`" }`), "by_id"},
		{"repeated string", outer(t, `tags: "a" tags: "`+hole+`"`), "tags[1]"},
		{"oneof", outer(t, `text: "`+hole+`"`), "text"},
		{"nested message", outer(t, `blob: "\xff" inner { s: "`+hole+`" }`), "inner.s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRequestCodec(1 << 20)
			m := tt.msg.ProtoReflect().New().Interface()
			err := decode(t, c, breakUTF8(t, tt.msg), m)
			fe, ok := errors.AsType[*fieldError](err)
			if !ok || fe.Reason != reasonInvalidUTF8 || fe.Field != tt.field {
				t.Fatalf("refusal %#v, want INVALID_UTF8 on %q", err, tt.field)
			}
			if !proto.Equal(m, m.ProtoReflect().New().Interface()) {
				t.Errorf("the refused message is not empty: %v", m)
			}
			if c.refusal(m) != nil {
				t.Error("a refusal is returned twice")
			}
		})
	}
}

func TestRequestCodecOther(t *testing.T) {
	const limit = 1000
	valid := &savepointv1.SaveCheckpointRequest{SessionId: "s", Labels: map[string]string{"a": "ä"}, StateJson: `"\u00e9"`}
	validBytes, _ := proto.Marshal(valid)
	big := &savepointv1.SaveCheckpointRequest{SessionId: hole, Task: string(bytes.Repeat([]byte("t"), limit))}
	tests := []struct {
		name  string
		b     []byte
		check func(error) bool
	}{
		{"valid", validBytes, func(err error) bool { return err == nil }},
		{"empty", nil, func(err error) bool { return err == nil }},
		{"over the limit, invalid UTF-8 too", breakUTF8(t, big), func(err error) bool {
			se, ok := errors.AsType[*requestSizeError](err)
			return ok && se.Limit == limit && se.Size == proto.Size(big) && errors.Is(err, ErrRequestTooLarge)
		}},
		{"truncated", validBytes[:len(validBytes)-1], isMalformed},
		{"group end without start", protowire.AppendTag(nil, 3, protowire.EndGroupType), isMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRequestCodec(limit)
			m := &savepointv1.SaveCheckpointRequest{}
			if err := decode(t, c, tt.b, m); !tt.check(err) {
				t.Fatalf("refusal %v", err)
			}
		})
	}
	c := newRequestCodec(limit)
	m := &savepointv1.SaveCheckpointRequest{}
	if decode(t, c, validBytes, m); !proto.Equal(m, valid) {
		t.Errorf("decoded %v, want %v", m, valid)
	}
	// Past protobuf's recursion limit (10000), in a type that recurses.
	inner := dynamicpb.NewMessage(testFile.Messages().ByName("Inner"))
	if err := decode(t, newRequestCodec(1<<20), nested(10001), inner); !isMalformed(err) {
		t.Errorf("10001 levels of nesting: refusal %v", err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(validBytes)}, struct{}{}); err == nil {
		t.Error("decoding into a non-message succeeded")
	}
}

func isMalformed(err error) bool {
	_, fe := errors.AsType[*fieldError](err)
	return err != nil && errors.Is(err, core.ErrInvalidArgument) && !fe
}

// nested returns a codectest.Inner nested depth times through its field 2.
func nested(depth int) []byte {
	var b []byte
	for range depth {
		b = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b)
	}
	return b
}

func TestTransportLimit(t *testing.T) {
	for _, tt := range []struct{ max, want int }{
		{4 << 20, 16 << 20},
		{1, 4},
		{1 << 30, 1<<31 - 1},
	} {
		if got := newRequestCodec(tt.max).transportLimit(); got != tt.want {
			t.Errorf("transportLimit for %d = %d, want %d", tt.max, got, tt.want)
		}
	}
}

// TestRequestCodecDropsOrphans: a refusal no interceptor collected (the call
// ended before it) is dropped after orphanAge, while a fresh one is kept.
func TestRequestCodecDropsOrphans(t *testing.T) {
	c := newRequestCodec(10)
	orphan := &savepointv1.ResumeRequest{}
	c.refusals.Store(orphan, refusal{err: ErrRequestTooLarge, at: time.Now().Add(-orphanAge)})
	recent := &savepointv1.ResumeRequest{}
	c.refusals.Store(recent, refusal{err: ErrRequestTooLarge, at: time.Now()})
	m := &savepointv1.ResumeRequest{}
	if err := decode(t, c, make([]byte, 11), m); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("refusal %v", err)
	}
	if c.refusal(orphan) != nil {
		t.Error("the orphaned refusal was kept")
	}
	if c.refusal(recent) == nil {
		t.Error("a recent refusal was dropped")
	}
}
