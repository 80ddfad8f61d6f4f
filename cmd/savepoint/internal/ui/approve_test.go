package ui

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// seedApprovals saves session pay-9 with two calls of a tool that requires
// approval, toolu_p1 ({"amount":5}) and toolu_p2 ({"amount":900}), each
// begun once so that it waits for approval, and a thread pay-thread whose
// call call_p waits too.
func seedApprovals(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	ctx := t.Context()
	calls := []*savepointv1.ToolUse{
		{ToolUseId: "toolu_p1", Name: "pay", InputJson: `{"amount":5}`, BeginTracked: true},
		{ToolUseId: "toolu_p2", Name: "pay", InputJson: `{"amount":900}`, BeginTracked: true},
	}
	if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "pay-9", Task: "Pay the invoices", PendingToolUses: calls,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"pay them"`}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		r, err := d.Client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay-9", ToolUseId: c.GetToolUseId(), RequiresApproval: true})
		if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_AWAIT_APPROVAL {
			t.Fatalf("begin %s: %v %v", c.GetToolUseId(), r, err)
		}
	}
	g := savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	r, err := g.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "pay-thread", ToolUseId: "call_p", Name: "pay", InputJson: `{"amount":7}`, RequiresApproval: true})
	if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_AWAIT_APPROVAL {
		t.Fatalf("thread begin: %v %v", r, err)
	}
}

var digestField = regexp.MustCompile(`name="input_digest" value="([0-9a-f]{64})"`)

func TestApproveFromTheInspector(t *testing.T) {
	s, base, c, d := inspector(t, false)
	seedApprovals(t, d)
	const path = "/sessions/pay-9/approve"

	_, body := fetch(t, c, base+"/sessions/pay-9")
	for _, tu := range []string{"toolu_p1", "toolu_p2"} {
		if !strings.Contains(body, `href="/sessions/pay-9/approve?tool_use_id=`+tu+`"`) {
			t.Errorf("the session page has no approval link for %s", tu)
		}
	}
	wantText(t, "session", body, "2 awaiting approval")
	if p := text(body[strings.Index(body, `id="pending"`):strings.Index(body, `id="timeline"`)]); !strings.Contains(p, "toolu_p1 pay") || strings.Count(p, "approval: waiting since") != 2 {
		t.Errorf("the pending table lacks the calls' approval records: %s", p)
	}
	_, body = fetch(t, c, base+"/sessions")
	wantText(t, "sessions", body, "pay-9 waiting Pay the invoices 0 1 1 2 0 0/0 2 20")

	code, body := fetch(t, c, base+path+"?tool_use_id=toolu_p1")
	if code != 200 {
		t.Fatalf("approval form: %d %s", code, text(body))
	}
	wantText(t, "approval form", body, "tool_use_id toolu_p1", "Tool pay", `"amount": 5`, "Approve", "Deny")
	m := digestField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the form carries no input digest:\n%s", body)
	}
	if code, body := fetch(t, c, base+"/sessions/report-1/approve?tool_use_id=toolu_01"); code != 409 || !strings.Contains(body, "APPROVAL_NOT_WAITING") {
		t.Errorf("approval form of a call that does not wait: %d %s", code, text(body))
	}

	approve := url.Values{"tool_use_id": {"toolu_p1"}, "decision": {"approve"}, "input_digest": {m[1]}, "note": {"checked the amount"}, "by": {"alice"}}
	if code, body := rawPost(t, c, base, path, base, withConfirmed(approve)); code != 403 || !strings.Contains(body, "BAD_CSRF_TOKEN") {
		t.Errorf("without the CSRF token: %d %s", code, text(body))
	}
	evil := withConfirmed(approve)
	evil.Set("csrf", s.csrf)
	if code, body := rawPost(t, c, base, path, "http://evil.example", evil); code != 403 || !strings.Contains(body, "CROSS_ORIGIN") {
		t.Errorf("from another origin: %d %s", code, text(body))
	}
	// The first step only shows the decision back.
	code, body = submit(t, s, c, base, path, approve)
	if code != 200 || !strings.Contains(text(body), "Decision approve By alice (a person) Note checked the amount") {
		t.Fatalf("approval confirmation: %d %s", code, text(body))
	}
	if e := ledgerEntry(t, d, "pay-9", "toolu_p1"); e.GetApproval().GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
		t.Fatalf("the form's first step wrote: %v", e)
	}
	// A digest of other input: the daemon refuses it, nothing changed.
	other := url.Values{}
	for k, v := range approve {
		other[k] = v
	}
	other.Set("input_digest", strings.Repeat("0", 64))
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, other))
	if code != 409 || !strings.Contains(body, "APPROVAL_INPUT_MISMATCH") || !strings.Contains(text(body), "Nothing was changed.") {
		t.Errorf("approval of other input: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, approve))
	if code != 200 || !strings.Contains(text(body), "pay-9 toolu_p1 (pay) is approved by alice (a person) at") {
		t.Fatalf("approve: %d %s", code, text(body))
	}
	// The agent's next begin runs it, once, and spends the approval.
	r, err := d.Client.BeginEffect(t.Context(), &savepointv1.BeginEffectRequest{SessionId: "pay-9", ToolUseId: "toolu_p1", RequiresApproval: true})
	if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_RUN || !r.GetApproval().GetSpent() {
		t.Errorf("begin after the approval: %v %v", r, err)
	}

	// Deny toolu_p2: the begin answers DENIED with the note.
	_, body = fetch(t, c, base+path+"?tool_use_id=toolu_p2")
	m = digestField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no digest for toolu_p2")
	}
	deny := url.Values{"tool_use_id": {"toolu_p2"}, "decision": {"deny"}, "input_digest": {m[1]}, "note": {"over the limit; ask finance"}, "by": {"bob"}}
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, deny))
	if code != 200 || !strings.Contains(text(body), "toolu_p2 (pay) is denied by bob (a person)") {
		t.Fatalf("deny: %d %s", code, text(body))
	}
	r, err = d.Client.BeginEffect(t.Context(), &savepointv1.BeginEffectRequest{SessionId: "pay-9", ToolUseId: "toolu_p2", RequiresApproval: true})
	if err != nil || r.GetDecision() != savepointv1.Decision_DECISION_DENIED || r.GetApproval().GetNote() != "over the limit; ask finance" {
		t.Errorf("begin after the denial: %v %v", r, err)
	}
	// Approving it now is a conflict: the first decision stands.
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, url.Values{"tool_use_id": {"toolu_p2"}, "decision": {"approve"}, "input_digest": {m[1]}}))
	if code != 409 || !strings.Contains(body, "APPROVAL_CONFLICT") {
		t.Errorf("approve after a denial: %d %s", code, text(body))
	}
	_, body = fetch(t, c, base+"/sessions/pay-9")
	ledger := text(body[strings.Index(body, `id="ledger"`):])
	for _, w := range []string{"approved by alice at", "“checked the amount”; spent by its begin", "denied by bob at", "“over the limit; ask finance”"} {
		if !strings.Contains(ledger, w) {
			t.Errorf("the ledger lacks %q: %s", w, ledger)
		}
	}
	// Bad forms.
	for _, f := range []url.Values{
		{"tool_use_id": {"toolu_p2"}, "decision": {"maybe"}, "input_digest": {m[1]}},
		{"tool_use_id": {"toolu_p2"}, "decision": {"approve"}, "input_digest": {"xyz"}},
	} {
		if code, body := submit(t, s, c, base, path, f); code != 400 || !strings.Contains(body, "BAD_FORM") {
			t.Errorf("bad form %v: %d %s", f, code, text(body))
		}
	}

	// A thread's call.
	_, body = fetch(t, c, base+"/graph/thread?id=pay-thread")
	if !strings.Contains(body, `href="/graph/approve?id=pay-thread&amp;ns=&amp;tool_use_id=call_p"`) {
		t.Fatalf("the thread page has no approval link:\n%s", text(body))
	}
	wantText(t, "thread", body, "awaits approval", "1 awaiting approval")
	_, body = fetch(t, c, base+"/graph/approve?id=pay-thread&ns=&tool_use_id=call_p")
	m = digestField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no digest on the thread's approval form:\n%s", text(body))
	}
	form := url.Values{"id": {"pay-thread"}, "ns": {""}, "tool_use_id": {"call_p"}, "decision": {"approve"}, "input_digest": {m[1]}, "by": {"carol"}}
	code, body = submit(t, s, c, base, "/graph/approve", confirmation(t, s, c, base, "/graph/approve", form))
	if code != 200 || !strings.Contains(text(body), "Thread pay-thread, namespace (root): call_p (pay) is approved by carol") {
		t.Fatalf("thread approve: %d %s", code, text(body))
	}
	tr, err := savepointv1.NewGraphCheckpointServiceClient(d.Conn).BeginThreadEffect(t.Context(), &savepointv1.BeginThreadEffectRequest{
		ThreadId: "pay-thread", ToolUseId: "call_p", Name: "pay", InputJson: `{"amount":7}`, RequiresApproval: true})
	if err != nil || tr.GetDecision() != savepointv1.Decision_DECISION_RUN {
		t.Errorf("thread begin after the approval: %v %v", tr, err)
	}
}
