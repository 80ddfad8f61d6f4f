package ui

import (
	"regexp"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestPagesShowDuplicates: the Session and Thread pages show a call the
// duplicate-intent guard caught as not run, naming the earlier call it
// repeats and what the ledger holds of it, and offer no Resolve form for it
// (the earlier call is the one to resolve).
func TestPagesShowDuplicates(t *testing.T) {
	_, base, c, d := inspector(t, false)
	ctx := t.Context()
	raw, graph := d.Client, savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	call := func(id string) *savepointv1.ToolUse {
		return &savepointv1.ToolUse{ToolUseId: id, Name: "send_payment", InputJson: `{"amount":5}`,
			EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true}
	}
	// An earlier run begins toolu_a and dies before recording it; the
	// resumed run's model reissues it as toolu_b.
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "pay", Task: "pay bob", Turn: 1,
		PendingToolUses: []*savepointv1.ToolUse{call("toolu_a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay", ToolUseId: "toolu_a"}); err != nil {
		t.Fatal(err)
	}
	res, err := raw.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "pay", Task: "pay bob", Turn: 1, ExpectedRevision: 1,
		Epoch: res.GetEpoch(), PendingToolUses: []*savepointv1.ToolUse{call("toolu_b")}}); err != nil {
		t.Fatal(err)
	}
	b, err := raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay", ToolUseId: "toolu_b", Epoch: res.GetEpoch()})
	if err != nil {
		t.Fatal(err)
	}
	if b.GetDuplicate().GetToolUseId() != "toolu_a" {
		t.Fatalf("not caught: %v", b)
	}
	code, body := fetch(t, c, base+"/sessions/pay")
	if code != 200 {
		t.Fatalf("session: %d %s", code, text(body))
	}
	dup := "not run : the duplicate-intent guard caught it as a repeat of toolu_a , the same call (same tool, same input) of an earlier, interrupted run; "
	wantText(t, "session", body,
		dup+"the earlier call is not recorded, its outcome unknown; the model was told it may have taken effect",
		"toolu_b send_payment side effect - - "+"not run")
	row := regexp.MustCompile(`(?s)<tr data-tool-use="toolu_b">.*?</tr>`).FindAllString(body, -1)
	if len(row) == 0 {
		t.Fatalf("no row for toolu_b:\n%s", body)
	}
	for _, r := range row {
		if strings.Contains(r, `class="resolve"`) {
			t.Errorf("a Resolve link for the caught duplicate:\n%s", r)
		}
	}

	// The earlier call recorded: the page says the model was given its
	// output.
	if _, err := raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "pay", ToolUseId: "toolu_a", Output: "paid"}); err != nil {
		t.Fatal(err)
	}
	_, body = fetch(t, c, base+"/sessions/pay")
	wantText(t, "session after record", body, dup+"the earlier call is recorded; the model was given its output")

	// A graph thread: run r1 began call_a from checkpoint 02, run r2
	// reissues it as call_b.
	for _, b := range []struct{ id, cp, run string }{{"call_a", "02", "r1"}, {"call_b", "03", "r2"}} {
		if _, err := graph.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "th", ToolUseId: b.id, Name: "send_payment",
			InputJson: `{"amount":5}`, CheckpointId: b.cp, RunId: b.run}); err != nil {
			t.Fatal(err)
		}
	}
	code, body = fetch(t, c, base+"/graph/thread?id=th")
	if code != 200 {
		t.Fatalf("thread: %d %s", code, text(body))
	}
	wantText(t, "thread", body,
		"not run : the duplicate-intent guard caught it as a repeat of call_a , the same call (same tool, same input) of an earlier, interrupted run; the earlier call is not recorded, its outcome unknown",
		"(root) call_b send_payment side effect 0 not run - -", "not run: never ran: it repeats call_a")
	trs := regexp.MustCompile(`(?s)<tr data-tool-use="call_b">.*?</tr>`).FindString(body)
	if trs == "" || strings.Contains(trs, `class="resolve"`) {
		t.Errorf("call_b's row has a Resolve link or is missing:\n%s", trs)
	}
	if tra := regexp.MustCompile(`(?s)<tr data-tool-use="call_a">.*?</tr>`).FindString(body); !strings.Contains(tra, `class="resolve"`) {
		t.Errorf("call_a, in doubt, has no Resolve link:\n%s", tra)
	}
}
