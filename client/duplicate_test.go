package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
)

// TestDuplicateToolUse drives the duplicate-intent guard through the Go
// client: a payment registered and run by one process, which dies before
// the model's message is saved; the process that takes over is asked for
// the same payment under a new id (by RegisterToolUse, and by PointA and
// RunTool) and answers the model with the daemon's text without running
// the tool. An uncrashed run calling the tool twice runs it twice, and a
// repeatable tool is not guarded.
func TestDuplicateToolUse(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	ctx := t.Context()
	payments := 0
	pay := func(context.Context, string) (string, error) {
		payments++
		return "paid 5 to bob", nil
	}
	call := func(id, input string) client.ToolUse {
		return client.ToolUse{ToolUseID: id, Name: "send_payment", InputJSON: input}
	}
	assistant := client.Message{Role: "assistant", ContentJSON: `[{"type":"text","text":"paying"}]`}

	// The first process registers the call, runs it, records it, and is
	// killed before the model's message is saved.
	s, err := c.Start(ctx, "pay", "pay bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := s.RegisterToolUse(ctx, call("toolu_1", `{"to":"bob","amount":5}`))
	if err != nil || reg.Duplicate != nil {
		t.Fatalf("first registration: %+v %v", reg, err)
	}
	out, _ := pay(ctx, reg.IdempotencyKey)
	if _, err := s.RecordToolUse(ctx, "toolu_1", out, false); err != nil {
		t.Fatal(err)
	}

	// The second process asks the model again; the model reissues the call.
	r, err := c.Resume(ctx, "pay")
	if err != nil {
		t.Fatal(err)
	}
	reg, err = r.RegisterToolUse(ctx, call("toolu_2", `{"amount": 5, "to": "bob"}`))
	if err != nil || reg.Duplicate == nil || reg.IdempotencyKey != "" {
		t.Fatalf("reissued registration: %+v %v", reg, err)
	}
	if d := reg.Duplicate; d.GetToolUseId() != "toolu_1" || d.GetIsError() || d.GetEffect().GetOutput() != "paid 5 to bob" ||
		!strings.Contains(d.GetToolResultText(), "toolu_1") || !strings.HasSuffix(d.GetToolResultText(), "paid 5 to bob") {
		t.Fatalf("duplicate: %v", d)
	}
	// A repeatable tool is not guarded.
	rep := call("toolu_4", `{"to":"bob","amount":5}`)
	rep.Repeatable = true
	if reg, err := r.RegisterToolUse(ctx, rep); err != nil || reg.Duplicate != nil || reg.IdempotencyKey == "" {
		t.Fatalf("repeatable: %+v %v", reg, err)
	}
	if _, err := r.RecordToolUse(ctx, "toolu_4", "paid 5 to bob", false); err != nil {
		t.Fatal(err)
	}
	// By PointA and RunTool: the tool is not run, the result is the text.
	if err := r.PointA(ctx, assistant, []client.ToolUse{call("toolu_3", `{"to":"bob","amount":5}`)}); err != nil {
		t.Fatal(err)
	}
	res := r.RunTool(ctx, call("toolu_3", `{"to":"bob","amount":5}`), pay)
	if res.Err != nil || res.DuplicateOf != "toolu_1" || res.IsError || !strings.HasSuffix(res.Content, "paid 5 to bob") {
		t.Fatalf("RunTool of the reissued call: %+v", res)
	}
	if err := r.PointB(ctx, []client.ToolResult{res}); err != nil {
		t.Fatal(err)
	}
	if payments != 1 {
		t.Fatalf("the payment ran %d times", payments)
	}

	// An uncrashed run that calls the tool twice with the same input runs it
	// twice.
	s2, err := c.Start(ctx, "twice", "pay bob twice", nil)
	if err != nil {
		t.Fatal(err)
	}
	twice := []client.ToolUse{call("a", `{"to":"bob","amount":5}`), call("b", `{"to":"bob","amount":5}`)}
	if err := s2.PointA(ctx, assistant, twice); err != nil {
		t.Fatal(err)
	}
	results, err := s2.RunTools(ctx, twice, func(ctx context.Context, _ client.ToolUse, key string) (string, error) { return pay(ctx, key) })
	if err != nil || len(results) != 2 || results[0].DuplicateOf != "" || results[1].DuplicateOf != "" {
		t.Fatalf("uncrashed twice: %+v %v", results, err)
	}
	if payments != 3 {
		t.Fatalf("after two calls in one run the payment ran %d times", payments)
	}
}
