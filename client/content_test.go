package client_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
)

// TestToolContent runs the ledger-output cases every client reads the same
// way (testdata/tool_content.json).
func TestToolContent(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "testdata", "tool_content.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name   string `json:"name"`
			Output string `json:"output"`
			Blocks bool   `json:"blocks"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil || len(file.Cases) < 10 {
		t.Fatalf("testdata/tool_content.json: %v, %d cases", err, len(file.Cases))
	}
	for _, c := range file.Cases {
		raw, ok := client.ToolContent(c.Output)
		if ok != c.Blocks || (ok && string(raw) != c.Output) {
			t.Errorf("%s: ToolContent(%q) = %s, %v; want blocks %v", c.Name, c.Output, raw, ok, c.Blocks)
		}
	}
	if _, err := client.ContentBlocks(map[string]string{"text": "no type"}); err == nil {
		t.Error("ContentBlocks accepted a block without a type")
	}
}

// TestContentBlocksReused: a tool that answers with text and image blocks,
// a crash after RecordEffect, and REUSE: the model receives the same blocks,
// and the in-doubt text stays a string.
func TestContentBlocksReused(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	ctx := t.Context()
	blocks := []any{
		map[string]any{"type": "text", "text": "sales by month"},
		map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
	}
	out, err := client.ContentBlocks(blocks...)
	if err != nil {
		t.Fatal(err)
	}
	chart := client.ToolUse{ToolUseID: "toolu_chart", Name: "chart", EffectClass: client.SideEffect}
	c := dial(t, addr)
	s, err := c.Start(ctx, "blocks", "t", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"chart"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(ctx, assistantFor(chart), []client.ToolUse{chart}); err != nil {
		t.Fatal(err)
	}
	if r := s.RunTool(ctx, chart, func(context.Context, string) (string, error) { return out, nil }); r.Err != nil || r.LedgerErr != nil {
		t.Fatal(r.Err, r.LedgerErr)
	}
	// The crash: Point B never saved. A new client resumes.
	r, err := dial(t, addr).Resume(ctx, "blocks")
	if err != nil {
		t.Fatal(err)
	}
	results, err := r.Reconcile(ctx, nil)
	if err != nil || len(results) != 1 || results[0].Decision != client.DecisionReuse {
		t.Fatalf("reconcile: %v %+v", err, results)
	}
	if err := r.PointB(ctx, results); err != nil {
		t.Fatal(err)
	}
	msgs := r.Messages()
	var got []struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal([]byte(msgs[len(msgs)-1].ContentJSON), &got); err != nil {
		t.Fatal(err)
	}
	var gotBlocks, want any
	_ = json.Unmarshal(got[0].Content, &gotBlocks)
	_ = json.Unmarshal([]byte(out), &want)
	if g, w := mustJSON(t, gotBlocks), mustJSON(t, want); g != w {
		t.Fatalf("the model gets %s, want the blocks %s", g, w)
	}
	// An is_error result (the in-doubt text) stays a string even if it looks like blocks.
	m, err := client.AnthropicToolResults([]client.ToolResult{{ToolUseID: "x", Content: out, IsError: true}})
	if err != nil {
		t.Fatal(err)
	}
	var errBlock []struct {
		Content any `json:"content"`
	}
	_ = json.Unmarshal([]byte(m[0].ContentJSON), &errBlock)
	if _, isString := errBlock[0].Content.(string); !isString {
		t.Fatalf("an is_error result's content is %T, want a string", errBlock[0].Content)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
