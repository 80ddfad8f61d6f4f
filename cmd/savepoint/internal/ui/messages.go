package ui

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// maxShown is the most bytes of one message, value or input a page shows
// before it cuts the text and links to the whole of it.
const maxShown = 16 << 10

// blockView is one content block of a message, as a person reads it.
type blockView struct {
	Kind      string // text, tool_use, tool_result, other
	Text      string // text; the JSON of other blocks
	Name, ID  string // tool_use: the tool and its tool_use_id; tool_result: the tool_use_id
	InputJSON string // tool_use: the input, indented
	IsError   bool   // tool_result: is_error
	Cut       bool   // Text or InputJSON was cut to maxShown
}

// messageView is one message of a history.
type messageView struct {
	Index  int
	Role   string
	Size   int
	Blocks []blockView
}

func cut(s string) (string, bool) {
	if len(s) <= maxShown {
		return s, false
	}
	s = s[:maxShown]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…", true
}

// viewMessage decodes a message's content JSON (a string, or Anthropic's
// list of blocks) into blocks; content of another shape is one "other"
// block of indented JSON.
func viewMessage(i int, m *savepointv1.Message) messageView {
	v := messageView{Index: i, Role: m.GetRole(), Size: len(m.GetContentJson())}
	var text string
	if json.Unmarshal([]byte(m.GetContentJson()), &text) == nil {
		t, c := cut(text)
		v.Blocks = []blockView{{Kind: "text", Text: t, Cut: c}}
		return v
	}
	var blocks []map[string]json.RawMessage
	if len(m.GetContentJson()) > 4*maxShown || json.Unmarshal([]byte(m.GetContentJson()), &blocks) != nil {
		t, c := cut(prettyJSON(m.GetContentJson()))
		v.Blocks = []blockView{{Kind: "other", Text: t, Cut: c}}
		return v
	}
	for _, b := range blocks {
		var typ, s string
		json.Unmarshal(b["type"], &typ)
		bv := blockView{Kind: typ}
		switch typ {
		case "text":
			json.Unmarshal(b["text"], &s)
			bv.Text, bv.Cut = cut(s)
		case "tool_use":
			json.Unmarshal(b["name"], &bv.Name)
			json.Unmarshal(b["id"], &bv.ID)
			bv.InputJSON, bv.Cut = cut(prettyJSON(string(b["input"])))
		case "tool_result":
			json.Unmarshal(b["tool_use_id"], &bv.ID)
			json.Unmarshal(b["is_error"], &bv.IsError)
			if json.Unmarshal(b["content"], &s) == nil {
				bv.Text, bv.Cut = cut(s)
			} else {
				bv.Text, bv.Cut = cut(prettyJSON(string(b["content"])))
			}
		default:
			raw, _ := json.Marshal(b)
			bv.Kind = "other"
			bv.Text, bv.Cut = cut(prettyJSON(string(raw)))
		}
		v.Blocks = append(v.Blocks, bv)
	}
	return v
}

// toolUseIDs returns the tool_use ids that a history's messages name.
func toolUseIDs(msgs []*savepointv1.Message) map[string]bool {
	ids := map[string]bool{}
	for _, m := range msgs {
		if !strings.Contains(m.GetContentJson(), "tool_use") {
			continue
		}
		var blocks []struct{ Type, ID string }
		if json.Unmarshal([]byte(m.GetContentJson()), &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_use" && b.ID != "" {
					ids[b.ID] = true
				}
			}
		}
	}
	return ids
}
