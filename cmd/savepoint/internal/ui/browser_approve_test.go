package ui

import (
	"testing"

	"github.com/chromedp/chromedp"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestBrowserApprove: in headless Chromium a person approves one call
// waiting for approval and denies another from the Session page, each
// through its confirmation; the agent's next begin runs the approved call
// (spending the approval) and is answered DENIED, with the note, for the
// other. A thread's call is approved the same way.
func TestBrowserApprove(t *testing.T) {
	_, base, _, d := inspector(t, false)
	b := newBrowser(t)
	seedApprovals(t, d)
	b.do(chromedp.Navigate(base+"/?token="+testToken), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	b.want(`tr[data-session="pay-9"]`, "pay-9")

	decide := func(tu, form, note string) {
		t.Helper()
		b.do(chromedp.Navigate(base+"/sessions/pay-9"), chromedp.WaitVisible(chromedp.CSS("#ledger")),
			chromedp.Click(chromedp.CSS(`#ledger tr[data-tool-use="`+tu+`"] a.approve`)), loaded("approve?tool_use_id="+tu),
			chromedp.WaitVisible(chromedp.CSS("#"+form+"-form")), chromedp.SendKeys(chromedp.CSS("#"+form+"-note"), note),
			chromedp.SetValue(chromedp.CSS("#"+form+"-by"), "alice"), chromedp.Click(chromedp.CSS("#"+form+"-submit")),
			chromedp.WaitVisible(chromedp.CSS("#decision")))
	}
	decide("toolu_p1", "approve", "checked the amount")
	b.want("#call", "toolu_p1", "pay", `"amount": 5`)
	b.want("#decision", "approve", "alice (a person)", "checked the amount", "runs it once")
	b.labelled()
	b.shot("approve-confirm")
	if e := ledgerEntry(t, d, "pay-9", "toolu_p1"); e.GetApproval().GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
		t.Fatalf("the form's first step wrote: %v", e)
	}
	b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "pay-9 toolu_p1 (pay) is approved by alice (a person)")

	decide("toolu_p2", "deny", "over the limit; ask finance")
	b.want("#decision", "deny", "over the limit; ask finance", "does not run")
	b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "pay-9 toolu_p2 (pay) is denied by alice (a person)")

	b.do(chromedp.Navigate(base+"/sessions/pay-9"), chromedp.WaitVisible(chromedp.CSS("#ledger")))
	b.want(`#ledger tr[data-tool-use="toolu_p1"]`, "approved by alice", "checked the amount")
	b.want(`#ledger tr[data-tool-use="toolu_p2"]`, "denied by alice", "over the limit; ask finance")

	// The agent's next begins: the approved call runs once, the denied one
	// is answered with the note.
	ctx := t.Context()
	r, err := d.Client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay-9", ToolUseId: "toolu_p1", RequiresApproval: true})
	if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_RUN || !r.GetApproval().GetSpent() {
		t.Errorf("begin of the approved call: %v %v", r, err)
	}
	r, err = d.Client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay-9", ToolUseId: "toolu_p2", RequiresApproval: true})
	if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_DENIED || r.GetApproval().GetNote() != "over the limit; ask finance" {
		t.Errorf("begin of the denied call: %v %v", r, err)
	}

	// A thread's call.
	b.do(chromedp.Navigate(base+"/graph/thread?id=pay-thread"), chromedp.WaitVisible(chromedp.CSS("#ledger")),
		chromedp.Click(chromedp.CSS(`#ledger tr[data-tool-use="call_p"] a.approve`)), loaded("/graph/approve"),
		chromedp.WaitVisible(chromedp.CSS("#approve-form")), chromedp.Click(chromedp.CSS("#approve-submit")),
		chromedp.WaitVisible(chromedp.CSS("#decision")), chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "call_p (pay) is approved")
	tr, err := savepointv1.NewGraphCheckpointServiceClient(d.Conn).BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{
		ThreadId: "pay-thread", ToolUseId: "call_p", Name: "pay", InputJson: `{"amount":7}`, RequiresApproval: true})
	if err != nil || tr.GetDecision() != savepointv1.Decision_DECISION_RUN {
		t.Errorf("the thread's begin after the approval: %v %v", tr, err)
	}
}
