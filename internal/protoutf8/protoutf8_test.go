package protoutf8

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
)

const bad = "a\xffb"

// TestFirst covers what the daemon's and the client's tests do not reach
// through Savepoint's own messages: a message value inside a map, a
// non-string map key, and proto2, whose strings need not be UTF-8. The
// bytes-view form is covered by the daemon's bad-input tests, and both forms
// against each other by the client's TestDaemonInvalidUTF8.
func TestFirst(t *testing.T) {
	tests := []struct {
		name       string
		m          proto.Message
		field, msg string // field "": no fault
	}{
		{"valid", &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("é")}}, "", ""},
		{"string in a message value of a map",
			&structpb.Struct{Fields: map[string]*structpb.Value{"ok": structpb.NewStringValue("x"), "k": structpb.NewStringValue(bad)}},
			`fields["k"].string_value`, "is not valid UTF-8; a string field must be, so send other data base64-encoded"},
		{"deep in a list of a map value", &structpb.Struct{Fields: map[string]*structpb.Value{"l": structpb.NewListValue(&structpb.ListValue{
			Values: []*structpb.Value{structpb.NewNumberValue(1), structpb.NewStringValue(bad)}})}},
			`fields["l"].list_value.values[1].string_value`, "is not valid UTF-8; a string field must be, so send other data base64-encoded"},
		{"map key", &structpb.Struct{Fields: map[string]*structpb.Value{bad: structpb.NewNullValue()}},
			"fields", "has a key that is not valid UTF-8; a string must be"},
		{"proto2 does not require UTF-8", &descriptorpb.FileDescriptorProto{Name: proto.String(bad)}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.m.ProtoReflect()
			f := First(r.Descriptor(), r)
			if tc.field == "" {
				if f != nil {
					t.Fatalf("First = %+v, want none", *f)
				}
				return
			}
			if f == nil || f.Field != tc.field || f.Msg != tc.msg {
				t.Fatalf("First = %+v, want {%s %s}", f, tc.field, tc.msg)
			}
		})
	}
}

func TestQuoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"team":                   `"team"`,
		string(make([]byte, 70)): `"` + strings.Repeat(`\x00`, 64) + `"...`,
		strings.Repeat("é", 40):  `"` + strings.Repeat("é", 32) + `"...`,
	} {
		if got := quoteKey(in); got != want {
			t.Errorf("quoteKey(%q) = %s, want %s", in, got, want)
		}
	}
}
