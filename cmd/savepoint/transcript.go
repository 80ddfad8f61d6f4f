package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// contentLines renders a message's content JSON for people. Content is the
// provider's and opaque to Savepoint; the common shapes read as text: a JSON
// string, and an array of content blocks of the Anthropic Messages API (text,
// tool_use, tool_result). Anything else is printed as compact JSON.
func contentLines(contentJSON string) []string {
	var v any
	if err := json.Unmarshal([]byte(contentJSON), &v); err != nil {
		return []string{contentJSON}
	}
	switch c := v.(type) {
	case string:
		return strings.Split(c, "\n")
	case []any:
		var out []string
		for _, b := range c {
			out = append(out, blockLines(b)...)
		}
		if len(out) == 0 {
			return []string{"(no content)"}
		}
		return out
	}
	return []string{compact(contentJSON)}
}

func blockLines(b any) []string {
	m, ok := b.(map[string]any)
	if !ok {
		return []string{compactValue(b)}
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	switch str("type") {
	case "text":
		if t, ok := m["text"].(string); ok {
			return strings.Split(t, "\n")
		}
	case "tool_use":
		return []string{fmt.Sprintf("tool_use %s %s %s", str("id"), str("name"), compactValue(m["input"]))}
	case "tool_result":
		head := "tool_result " + str("tool_use_id")
		if e, _ := m["is_error"].(bool); e {
			head += " (error)"
		}
		var body []string
		switch c := m["content"].(type) {
		case string:
			body = strings.Split(c, "\n")
		case []any:
			for _, x := range c {
				body = append(body, blockLines(x)...)
			}
		case nil:
		default:
			body = []string{compactValue(c)}
		}
		if len(body) == 0 {
			return []string{head}
		}
		body[0] = head + ": " + body[0]
		return body
	}
	return []string{compactValue(b)}
}

func compactValue(v any) string {
	if v == nil {
		return "{}"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// compact removes insignificant space from JSON text; invalid JSON is
// returned unchanged.
func compact(s string) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return s
	}
	return buf.String()
}
