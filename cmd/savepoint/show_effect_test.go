package main

import (
	"bytes"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestEffectPrintsItsResolutionOnce: an output of several lines is followed
// by one "resolved" line, not one per line.
func TestEffectPrintsItsResolutionOnce(t *testing.T) {
	var buf bytes.Buffer
	p := &printer{w: &buf}
	p.effect(&savepointv1.Effect{ToolUseId: "toolu_02", Name: "send_email", Output: "sent\nto 3 people\nid 77",
		Resolution: &savepointv1.EffectResolution{Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE,
			ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, ResolvedBy: "alice"}})
	out := buf.String()
	if n := strings.Count(out, "resolved  done by alice (person)"); n != 1 || !strings.HasSuffix(out, "resolved  done by alice (person) at -\n") {
		t.Errorf("the resolution is printed %d times, or not last:\n%s", n, out)
	}
}

// TestEarlierDecisions: a call resolved twice and decided twice prints its
// earlier resolution and decision after its current ones, in show (a
// session's and a thread's) and in the effects tables.
func TestEarlierDecisions(t *testing.T) {
	notDone := func(by string) *savepointv1.EffectResolution {
		return &savepointv1.EffectResolution{Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE,
			ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, ResolvedBy: by}
	}
	decided := func(by string, s savepointv1.ApprovalStatus) *savepointv1.EffectApproval {
		return &savepointv1.EffectApproval{Status: s, DecidedBy: by}
	}
	denied, approved := savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED, savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	waiting := &savepointv1.EffectApproval{Status: savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING}
	rs := []*savepointv1.EffectResolution{notDone("alice"), notDone("bob")}
	as := []*savepointv1.EffectApproval{decided("carol", denied), decided("dan", approved)}
	want := []string{"resolved not done by alice (person) at -", "denied by carol at -, input "}
	if got := earlierDecisions(rs, as, as[1]); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("earlier decisions: %q, want %q", got, want)
	}
	// While a begin asks again, every decision is an earlier one.
	if got := earlierDecisions(rs[:1], as, waiting); len(got) != 2 || !strings.HasPrefix(got[1], "approved by dan") {
		t.Errorf("earlier decisions while waiting: %q", got)
	}
	if got := earlierOutcome(rs[:1], as[:1], as[0]); got != "" {
		t.Errorf("no earlier decisions: %q", got)
	}

	var buf bytes.Buffer
	p := &printer{w: &buf}
	v := &sessionView{checkpoint: &savepointv1.Checkpoint{SessionId: "s", PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "t1", Name: "pay"}}},
		reconcile: &savepointv1.ReconcileResponse{Resolutions: []*savepointv1.Resolution{{ToolUse: &savepointv1.ToolUse{ToolUseId: "t1", Name: "pay"},
			Decision: savepointv1.Decision_DECISION_RUN, Resolution: rs[1], Approval: as[1]}}},
		ledger: map[string]*savepointv1.LedgerEntry{"t1": {ToolUseId: "t1", Resolutions: rs, Approvals: as, Approval: as[1]}}}
	p.pending(v)
	out := buf.String()
	for _, w := range want {
		if !strings.Contains(out, "    earlier   "+w) {
			t.Errorf("show does not print %q:\n%s", w, out)
		}
	}
	buf.Reset()
	if err := printThreadEffects(&buf, []*savepointv1.ThreadEffect{{ToolUseId: "c1", Name: "pay", Resolution: rs[1], Resolutions: rs}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "resolved not done by bob (person) at -; earlier: resolved not done by alice (person) at -") {
		t.Errorf("the thread's effects table:\n%s", buf.String())
	}
}
