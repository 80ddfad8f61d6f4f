package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
)

// Model is the agent's model: given the history, it answers with the next
// assistant message. The demo plugs in a Scripted model; a real provider
// client (the Anthropic Messages API, say) fits behind the same interface by
// turning its response into a Reply.
type Model interface {
	Create(ctx context.Context, messages []client.Message) (Reply, error)
}

// Reply is one model response, shaped like an Anthropic Messages API
// response: content blocks and a stop reason.
type Reply struct {
	Content []Block
	// StopReason is "tool_use" when Content names tools to run, else
	// "end_turn" (the final answer).
	StopReason string
	// Tokens is the input plus output tokens the response cost.
	Tokens uint64
}

// Block is one Anthropic content block: {"type":"text","text":...} or
// {"type":"tool_use","id":...,"name":...,"input":{...}}.
type Block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func textBlock(s string) Block { return Block{Type: "text", Text: s} }

func toolUseBlock(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

// ToolUses returns the reply's tool_use blocks as the client's tool uses,
// each with the effect class its tool declares.
func (r Reply) ToolUses() []client.ToolUse {
	var out []client.ToolUse
	for _, b := range r.Content {
		if b.Type == "tool_use" {
			out = append(out, client.ToolUse{ToolUseID: b.ID, Name: b.Name, InputJSON: string(b.Input), EffectClass: classOf(b.Name)})
		}
	}
	return out
}

// Text returns the reply's text blocks, joined.
func (r Reply) Text() string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Message returns the reply as the assistant message to save.
func (r Reply) Message() (client.Message, error) {
	b, err := json.Marshal(r.Content)
	if err != nil {
		return client.Message{}, err
	}
	return client.Message{Role: "assistant", ContentJSON: string(b)}, nil
}

// Scripted is the verification harness's model: a fixed queue of responses
// handed out in order, which fails loudly once drained instead of inventing
// an answer. It ignores the history, so what the model "says" on each turn
// is a constant and a crash test can assert on every line.
type Scripted struct {
	name   string
	queue  []Reply
	served int
	turn   int // the turn the next response is for, from 1
}

// scripts are the demo's fixed conversations, one response per turn.
var scripts = map[string][]Reply{
	// seed: the seed's task, one tool per turn: read_notes, count_words,
	// write_report, then the final answer.
	"seed": {
		{StopReason: "tool_use", Tokens: 120, Content: []Block{
			textBlock("I'll start by reading the sales notes."),
			toolUseBlock("toolu_01", "read_notes", `{"file":"sales-notes.txt"}`),
		}},
		{StopReason: "tool_use", Tokens: 180, Content: []Block{
			textBlock("Now I'll count the words in the notes."),
			toolUseBlock("toolu_02", "count_words", `{"file":"sales-notes.txt"}`),
		}},
		{StopReason: "tool_use", Tokens: 260, Content: []Block{
			textBlock("Writing the report."),
			toolUseBlock("toolu_03", "write_report", reportInput),
		}},
		{StopReason: "end_turn", Tokens: 90, Content: []Block{textBlock(finalAnswer)}},
	},
	// parallel: the second turn names two tool calls at once, a read-only
	// one and a side-effecting one; they run one after the other, in order.
	"parallel": {
		{StopReason: "tool_use", Tokens: 120, Content: []Block{
			textBlock("I'll start by reading the sales notes."),
			toolUseBlock("toolu_01", "read_notes", `{"file":"sales-notes.txt"}`),
		}},
		{StopReason: "tool_use", Tokens: 260, Content: []Block{
			textBlock("I'll count the words and write the report in one go."),
			toolUseBlock("toolu_02", "count_words", `{"file":"sales-notes.txt"}`),
			toolUseBlock("toolu_03", "write_report", reportInput),
		}},
		{StopReason: "end_turn", Tokens: 90, Content: []Block{textBlock(finalAnswer)}},
	},
}

const (
	finalAnswer = "Report written to report.txt, task complete."
	reportText  = "Q3 sales report, West region\n\n" +
		"Closed: Acme Corp ($18,000), Globex ($9,000), Initech ($15,000): $42,000 in total.\n" +
		"Open: Umbrella (quote, follow up in November), Hooli (legal review).\n" +
		"Source: sales-notes.txt, 43 words.\n"
)

var reportInput = func() string {
	b, err := json.Marshal(map[string]string{"file": "report.txt", "text": reportText})
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func scriptNames() []string {
	var names []string
	for n := range scripts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NewScripted returns the named script's model, continuing after turn
// fromTurn: 0 for a fresh run, the checkpoint's turn on --resume.
func NewScripted(name string, fromTurn uint32) (*Scripted, error) {
	replies, ok := scripts[name]
	if !ok {
		return nil, fmt.Errorf("unknown script %q (have %s)", name, strings.Join(scriptNames(), ", "))
	}
	start := min(int(fromTurn), len(replies))
	return &Scripted{name: name, queue: replies[start:], turn: int(fromTurn) + 1}, nil
}

// Create hands out the next response, or fails once the queue is drained.
func (m *Scripted) Create(_ context.Context, messages []client.Message) (Reply, error) {
	if len(m.queue) == 0 {
		return Reply{}, fmt.Errorf("scripted model %q: response queue drained after %d responses: the script has no response for turn %d (history of %d messages)",
			m.name, m.served, m.turn, len(messages))
	}
	r := m.queue[0]
	m.queue = m.queue[1:]
	m.served++
	m.turn++
	return r, nil
}
