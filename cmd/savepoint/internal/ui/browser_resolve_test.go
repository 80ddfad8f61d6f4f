package ui

import (
	"context"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestBrowserResolve: a person resolves report-1's two calls in doubt from
// the inspector in headless Chromium, one done with the output they found
// and one not done, each through its confirmation; then the agent resumes
// and its reconcile reuses the output found (the tool does not run) and
// runs the call not done again.
func TestBrowserResolve(t *testing.T) {
	s, base, _, d := inspector(t, false)
	b := newBrowser(t)
	seedThread(t, savepointv1.NewGraphCheckpointServiceClient(d.Conn))
	b.do(chromedp.Navigate(base+"/?token="+testToken), chromedp.WaitVisible(chromedp.CSS("#sessions")))

	// Done, with an output of two lines that is markup: shown as text,
	// never run, recorded with the line break typed (not the browser's
	// CRLF).
	const found = `<img src=x onerror="document.title='pwned'">sent to team@example.com, message id 77`
	b.do(chromedp.Navigate(base+"/sessions/report-1"), chromedp.WaitVisible(chromedp.CSS("#pending")),
		chromedp.Click(chromedp.CSS(`#pending tr[data-tool-use="toolu_02"] a.resolve`)), loaded("/resolve?tool_use_id=toolu_02"),
		chromedp.WaitVisible(chromedp.CSS("#resolve-done")))
	b.want("#call", "toolu_02", "send_email", "team@example.com")
	b.labelled()
	b.shot("resolve-form")
	b.do(chromedp.SendKeys(chromedp.CSS("#done-output"), found+"\nfrom the outbox"), chromedp.SendKeys(chromedp.CSS("#done-note"), "in the mail server's log"),
		chromedp.SetValue(chromedp.CSS("#done-by"), "alice"), chromedp.Click(chromedp.CSS("#resolve-done-submit")), chromedp.WaitVisible(chromedp.CSS("#finding")))
	b.want("#finding", "done", found, "alice (a person)", "in the mail server's log", "the tool does not run again")
	if e := ledgerEntry(t, d, "report-1", "toolu_02"); e.GetResolution() != nil {
		t.Fatalf("the form's first step wrote: %v", e)
	}
	b.labelled()
	b.shot("resolve-confirm")
	b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "report-1 toolu_02 (send_email) is resolved: done by alice (a person)", "the agent's next resume reuses it")

	// The session page now shows the output, as text, and who found it.
	b.do(chromedp.Navigate(base+"/sessions/report-1"), chromedp.WaitVisible(chromedp.CSS("#ledger")))
	b.want(`#ledger tr[data-tool-use="toolu_02"]`, found, "resolved done by alice (a person)", "in the mail server's log")
	b.want(`#pending tr[data-tool-use="toolu_02"]`, "reuse", "resolved done by alice")
	var title string
	var imgs float64
	b.eval(`document.title`, &title)
	b.eval(`document.querySelectorAll("#ledger img").length`, &imgs)
	if title == "pwned" || imgs != 0 {
		t.Errorf("the recorded output was rendered as markup: title %q, %v images", title, imgs)
	}
	var scrolled bool
	b.eval(`document.getElementById("ledger-heading").scrollIntoView(), true`, &scrolled)
	b.shot("session-resolved")

	// Not done, for the call that was never begin-tracked.
	b.do(chromedp.Click(chromedp.CSS(`#pending tr[data-tool-use="toolu_04"] a.resolve`)), loaded("tool_use_id=toolu_04"),
		chromedp.WaitVisible(chromedp.CSS("#resolve-not-done")), chromedp.SendKeys(chromedp.CSS("#not-done-note"), "the draft is still there"),
		chromedp.Click(chromedp.CSS("#resolve-not-done-submit")), chromedp.WaitVisible(chromedp.CSS("#finding")))
	b.want("#finding", "not done", "runs the call again")
	b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "toolu_04 (delete_draft) is resolved: not done", "runs it again")

	// A second, different finding for toolu_02 (a stale tab): the daemon's
	// refusal, readable, and nothing changed.
	b.do(chromedp.Navigate(base+"/sessions/report-1"), chromedp.WaitVisible(chromedp.CSS("#ledger")))
	csrf := s.csrf
	b.do(chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/sessions/report-1/resolve";
		for (const [k, v] of Object.entries({csrf: "`+csrf+`", tool_use_id: "toolu_02", outcome: "not_done", confirmed: "yes", request_id: "9d1c7f7e-3f7a-4a36-9d55-56b1b9a6c2aa"})) {
			const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); })()`), chromedp.WaitVisible(chromedp.CSS("#error-reason")))
	b.want("#error-reason", "RESOLUTION_CONFLICT")
	b.want("#error-message", "the first resolution stands", "Nothing was changed.")

	// The agent resumes: its reconcile reuses the output the person found
	// for toolu_02 and runs toolu_04 again (and toolu_03, never begun).
	agent := s.opts.Client
	ctx := t.Context()
	sess, err := agent.Resume(ctx, "report-1")
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	results, err := sess.Reconcile(ctx, func(_ context.Context, u client.ToolUse, _ string) (string, error) {
		ran = append(ran, u.ToolUseID)
		return "ran " + u.ToolUseID, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ran)
	if !slices.Equal(ran, []string{"toolu_03", "toolu_04"}) {
		t.Errorf("the resumed agent ran %q, want toolu_03 and toolu_04 only", ran)
	}
	got := map[string]client.ToolResult{}
	for _, r := range results {
		got[r.ToolUseID] = r
	}
	if r := got["toolu_02"]; r.Decision != client.DecisionReuse || r.Content != found+"\nfrom the outbox" || r.IsError {
		t.Errorf("toolu_02 on resume: %+v, want REUSE of the output found", r)
	}
	if r := got["toolu_04"]; r.Decision != client.DecisionRun || r.Content != "ran toolu_04" {
		t.Errorf("toolu_04 on resume: %+v, want RUN", r)
	}

	// A thread's call in doubt, resolved the same way.
	b.do(chromedp.Navigate(base+"/graph/thread?id=thread-1"), chromedp.WaitVisible(chromedp.CSS("#ledger")),
		chromedp.Click(chromedp.CSS(`#ledger tr[data-tool-use="call_doubt"] a.resolve`)), loaded("/graph/resolve"),
		chromedp.WaitVisible(chromedp.CSS("#resolve-done")), chromedp.SendKeys(chromedp.CSS("#done-output"), "sent #43"),
		chromedp.Click(chromedp.CSS("#resolve-done-submit")), chromedp.WaitVisible(chromedp.CSS("#finding")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "call_doubt (send_email) attempt 1 is resolved: done", "the node's next run reuses it")
	resp, err := savepointv1.NewGraphCheckpointServiceClient(d.Conn).BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{
		ThreadId: "thread-1", ToolUseId: "call_doubt", Name: "send_email", InputJson: `{"to":"call_doubt"}`})
	if err != nil || resp.GetDecision() != savepointv1.Decision_DECISION_REUSE || string(resp.GetEffect().GetOutput().GetData()) != `"sent #43"` {
		t.Errorf("the node's next begin: %v %v, want REUSE of \"sent #43\"", resp, err)
	}

	// A call the duplicate-intent guard caught: shown as not run, naming
	// the earlier call, and with no Resolve link (the earlier call, in
	// doubt, is the one to resolve).
	g := savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	for _, c := range []struct{ id, cp, run string }{{"call_a", "02", "r1"}, {"call_b", "03", "r2"}} {
		if _, err := g.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "th-dup", ToolUseId: c.id, Name: "send_payment",
			InputJson: `{"amount":5}`, CheckpointId: c.cp, RunId: c.run}); err != nil {
			t.Fatal(err)
		}
	}
	b.do(chromedp.Navigate(base+"/graph/thread?id=th-dup"), chromedp.WaitVisible(chromedp.CSS(`#ledger tr[data-tool-use="call_b"] .duplicate`)))
	b.want(`#ledger tr[data-tool-use="call_b"]`, "not run", "a repeat of call_a", "its outcome unknown")
	var linksA, linksB float64
	b.eval(`document.querySelectorAll('#ledger tr[data-tool-use="call_a"] a.resolve').length`, &linksA)
	b.eval(`document.querySelectorAll('#ledger tr[data-tool-use="call_b"] a.resolve').length`, &linksB)
	if linksA != 1 || linksB != 0 {
		t.Errorf("Resolve links of call_a and call_b: %v and %v, want 1 and 0", linksA, linksB)
	}
}
