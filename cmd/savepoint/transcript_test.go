package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestContentLines(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{`"hello\nworld"`, "hello|world"},
		{`[{"type":"text","text":"a <b> & c"}]`, "a <b> & c"},
		{`[{"type":"tool_use","id":"t1","name":"pay","input":{"to":"<x>","cents":5}}]`, `tool_use t1 pay {"cents":5,"to":"<x>"}`},
		{`[{"type":"tool_use","id":"t1","name":"ls"}]`, `tool_use t1 ls {}`},
		{`[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]`, "tool_result t1: ok"},
		{`[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"no\nway"}]}]`, "tool_result t1 (error): no|way"},
		{`[{"type":"tool_result","tool_use_id":"t1"}]`, "tool_result t1"},
		{`[{"type":"image","source":{"type":"base64"}}]`, `{"source":{"type":"base64"},"type":"image"}`},
		{`[]`, "(no content)"},
		{`[1, "x"]`, `1|"x"`},
		{`{"a": 1}`, `{"a":1}`},
		{`42`, `42`},
		{`not json`, `not json`},
	} {
		if got := strings.Join(contentLines(tc.content), "|"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.content, got, tc.want)
		}
	}
}

// contentLines renders whatever a client saved, without panicking, as lines.
func FuzzContentLines(f *testing.F) {
	for _, s := range []string{`"x"`, `[{"type":"text","text":"a"}]`, `[{"type":"tool_result","content":[{"type":"tool_use"}]}]`, `[[[]]]`, `null`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lines := contentLines(s)
		if len(lines) == 0 {
			t.Fatalf("%q: no lines", s)
		}
		if utf8.ValidString(s) {
			for _, l := range lines {
				if !utf8.ValidString(l) {
					t.Fatalf("%q: line %q is not UTF-8", s, l)
				}
			}
		}
	})
}
