package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonCases = []struct {
	in   string
	want bool
}{
	{``, false},
	{` `, false},
	{`null`, true},
	{` true `, true},
	{"\t\r\nfalse\n", true},
	{`nul`, false},
	{`nulls`, false},
	{`truefalse`, false},
	{`True`, false},
	{`0`, true},
	{`-0`, true},
	{`-`, false},
	{`01`, false},
	{`-01`, false},
	{`1.5e+10`, true},
	{`1.5E-10`, true},
	{`1e5`, true},
	{`1.`, false},
	{`.5`, false},
	{`1.e5`, false},
	{`1e`, false},
	{`1e+`, false},
	{`+1`, false},
	{`1 2`, false},
	{`0x10`, false},
	{`""`, true},
	{`"`, false},
	{`"abc`, false},
	{`"a\"b\\c\/d\be\ff\ng\rh\ti"`, true},
	{`"\u00e9\uD83D\uDE00"`, true},
	{`"\u00g9"`, false},
	{`"\u00e"`, false},
	{`"\x"`, false},
	{`"\'"`, false},
	{`"\`, false},
	{"\"tab\there\"", false},
	{"\"nul\x00\"", false},
	{"\"del\x7f and high \xff bytes\"", true},
	{"\"é and 😀 in a long string, longer than eight bytes\"", true},
	{`"0123456789abcdef0123456789abcdef"`, true},
	{`"0123456789abcdef0123456789abcde"f"`, false},
	{"\"0123456789abcdef\x1f0123456789abcdef\"", false},
	{`"0123456789abcdef\"0123456789abcdef"`, true},
	{`[]`, true},
	{`[ ]`, true},
	{`[1,2,3]`, true},
	{`[1,2,]`, false},
	{`[,1]`, false},
	{`[1 2]`, false},
	{`[`, false},
	{`]`, false},
	{`[1}`, false},
	{`{}`, true},
	{` { } `, true},
	{`{"a":1}`, true},
	{`{"a" : [true, {"b": null}], "c": "d"}`, true},
	{`{"a":1,}`, false},
	{`{"a"}`, false},
	{`{"a":}`, false},
	{`{a:1}`, false},
	{`{1:1}`, false},
	{`{"a":1 "b":2}`, false},
	{`{"a":1]`, false},
	{`{"a":1`, false},
	{`{,}`, false},
	{`[[[[[]]]]]`, true},
	{`[[[[[]]]]`, false},
	{`{"type":"text","text":"hello"} x`, false},
	{strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth), true},
	{strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), false},
	{strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth), true},
	{strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1), false},
}

// TestValidJSON checks validJSON on each case, and that encoding/json.Valid,
// which it replaces, agrees.
func TestValidJSON(t *testing.T) {
	for _, c := range jsonCases {
		name := c.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		if got := validJSON(c.in); got != c.want {
			t.Errorf("validJSON(%q) = %v, want %v", name, got, c.want)
		}
		if std := json.Valid([]byte(c.in)); std != c.want {
			t.Errorf("json.Valid(%q) = %v: the case's answer is not encoding/json's", name, std)
		}
	}
}

// FuzzValidJSON checks that validJSON answers as encoding/json.Valid does.
func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		if len(c.in) < 1000 {
			f.Add(c.in)
		}
	}
	f.Add(benchContent(100))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validJSON(s), json.Valid([]byte(s)); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", s, got, want)
		}
	})
}

// BenchmarkValidJSON compares validJSON with encoding/json.Valid on a 2 KiB
// message's content, as SaveCheckpoint checks it.
func BenchmarkValidJSON(b *testing.B) {
	s := benchContent(2048)
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if !validJSON(s) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if !json.Valid([]byte(s)) {
				b.Fatal("invalid")
			}
		}
	})
}
