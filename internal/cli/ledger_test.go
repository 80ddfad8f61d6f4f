package cli

import (
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestLedgerCounts(t *testing.T) {
	verify := &savepointv1.EffectResolution{ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_VERIFY, Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE}
	person := &savepointv1.EffectResolution{ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE}
	rec := &savepointv1.ReconcileResponse{Resolutions: []*savepointv1.Resolution{
		{Decision: savepointv1.Decision_DECISION_IN_DOUBT}, {Decision: savepointv1.Decision_DECISION_REUSE}, {Decision: savepointv1.Decision_DECISION_IN_DOUBT},
	}}
	waiting := &savepointv1.EffectApproval{Status: savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING}
	entries := []*savepointv1.LedgerEntry{{Resolution: verify}, {Resolution: person}, {Resolution: person}, {}, {Approval: waiting}}
	if got, want := CountSessionLedger(entries, rec), (LedgerCounts{InDoubt: 2, ResolvedByVerify: 1, ResolvedByPerson: 2, AwaitingApproval: 1}); got != want {
		t.Errorf("session: %+v, want %+v", got, want)
	}
	begun := savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN
	effects := []*savepointv1.ThreadEffect{
		{State: begun, Attempts: 1}, // side-effecting, begun: in doubt
		{State: begun, Attempts: 1, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY}, // runs again
		{State: begun, Attempts: 1, Resolution: person},                                          // not done: runs again
		{State: savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED, Attempts: 1, Resolution: verify},
		{State: begun, DuplicateOf: "call_1"}, // caught by the duplicate-intent guard: never ran
		{State: savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_NOT_BEGUN, Approval: waiting},
	}
	got := CountThreadLedger(effects)
	if want := (LedgerCounts{InDoubt: 1, ResolvedByVerify: 1, ResolvedByPerson: 1, AwaitingApproval: 1}); got != want {
		t.Errorf("thread: %+v, want %+v", got, want)
	}
	if s := got.String(); s != "1 in doubt; resolved 1 by a verify hook, 1 by a person; 1 awaiting approval" {
		t.Errorf("String: %q", s)
	}
}
