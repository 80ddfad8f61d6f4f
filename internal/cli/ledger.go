package cli

import (
	"fmt"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// LedgerCounts counts a ledger's calls in doubt now and the calls whose
// doubt was settled (ResolveEffect, ResolveThreadEffect), by who settled
// them, as savepoint show and the inspector print them.
type LedgerCounts struct {
	InDoubt          int
	ResolvedByVerify int
	ResolvedByPerson int
	// AwaitingApproval counts the calls that wait for a person's approval.
	AwaitingApproval int
}

// String is c as one line: "1 in doubt; resolved 0 by a verify hook, 2 by
// a person".
func (c LedgerCounts) String() string {
	s := fmt.Sprintf("%d in doubt; resolved %d by a verify hook, %d by a person", c.InDoubt, c.ResolvedByVerify, c.ResolvedByPerson)
	if c.AwaitingApproval > 0 {
		s += fmt.Sprintf("; %d awaiting approval", c.AwaitingApproval)
	}
	return s
}

func (c *LedgerCounts) add(r *savepointv1.EffectResolution) {
	switch r.GetResolverKind() {
	case savepointv1.ResolverKind_RESOLVER_KIND_VERIFY:
		c.ResolvedByVerify++
	case savepointv1.ResolverKind_RESOLVER_KIND_PERSON:
		c.ResolvedByPerson++
	}
}

// CountSessionLedger counts a session's calls: those Reconcile answers
// IN_DOUBT in rec (its latest revision's), and the ledger's entries that
// carry a resolution. A call resolved again after the new attempt its
// first resolution allowed was left in doubt too counts once here, and
// twice in ListSessions' resolved_by_*_count.
func CountSessionLedger(entries []*savepointv1.LedgerEntry, rec *savepointv1.ReconcileResponse) LedgerCounts {
	var c LedgerCounts
	for _, r := range rec.GetResolutions() {
		if r.GetDecision() == savepointv1.Decision_DECISION_IN_DOUBT {
			c.InDoubt++
		}
	}
	for _, e := range entries {
		if r := e.GetResolution(); r != nil {
			c.add(r)
		}
		if e.GetApproval().GetStatus() == savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
			c.AwaitingApproval++
		}
	}
	return c
}

// CountThreadLedger counts a graph thread's calls: those whose next begin
// is answered IN_DOUBT (client.NextBegin), and those whose latest attempt
// in doubt carries a resolution. A call the duplicate-intent guard caught
// never ran: the earlier call it repeats is counted, not it.
func CountThreadLedger(effects []*savepointv1.ThreadEffect) LedgerCounts {
	var c LedgerCounts
	for _, e := range effects {
		if e.GetDuplicateOf() != "" {
			continue
		}
		switch d, _ := client.NextBegin(e); d {
		case savepointv1.Decision_DECISION_IN_DOUBT:
			c.InDoubt++
		case savepointv1.Decision_DECISION_AWAIT_APPROVAL:
			c.AwaitingApproval++
		}
		if r := e.GetResolution(); r != nil {
			c.add(r)
		}
	}
	return c
}

// Earlier returns a call's resolutions and approval decisions before its
// current ones, oldest first, from a LedgerEntry's or ThreadEffect's
// resolutions and approvals: the last resolution is the current one, and
// so is the last approval when approval is a decision (not waiting).
func Earlier(rs []*savepointv1.EffectResolution, as []*savepointv1.EffectApproval, approval *savepointv1.EffectApproval) ([]*savepointv1.EffectResolution, []*savepointv1.EffectApproval) {
	if len(rs) > 0 {
		rs = rs[:len(rs)-1]
	}
	if len(as) > 0 && approval != nil && approval.GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
		as = as[:len(as)-1]
	}
	return rs, as
}
