package client

import (
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestNextBegin(t *testing.T) {
	const (
		begun     = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN
		succeeded = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED
		failed    = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED
		side      = savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
		readOnly  = savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY
		idem      = savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT
	)
	for _, tc := range []struct {
		state savepointv1.ThreadEffectState
		class savepointv1.EffectClass
		want  savepointv1.Decision
		why   string
	}{
		{succeeded, side, savepointv1.Decision_DECISION_REUSE, "without running the tool"},
		{succeeded, readOnly, savepointv1.Decision_DECISION_REUSE, "without running the tool"},
		{failed, side, savepointv1.Decision_DECISION_RUN, "runs attempt 3"},
		{begun, readOnly, savepointv1.Decision_DECISION_RUN, "read-only"},
		{begun, idem, savepointv1.Decision_DECISION_RUN, "same idempotency key"},
		{begun, side, savepointv1.Decision_DECISION_IN_DOUBT, "may have run"},
		{begun, savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, savepointv1.Decision_DECISION_IN_DOUBT, "may have run"},
	} {
		d, why := NextBegin(&savepointv1.ThreadEffect{State: tc.state, EffectClass: tc.class, Attempts: 2})
		if d != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%v %v: %v %q, want %v and %q", tc.state, tc.class, d, why, tc.want, tc.why)
		}
	}
	// A call the duplicate-intent guard caught never ran: its next begin is
	// answered from the call it repeats.
	d, why := NextBegin(&savepointv1.ThreadEffect{State: begun, EffectClass: side, DuplicateOf: "call_a"})
	if d != savepointv1.Decision_DECISION_IN_DOUBT || !strings.Contains(why, "never ran: it repeats call_a") {
		t.Errorf("caught duplicate: %v %q", d, why)
	}
}
