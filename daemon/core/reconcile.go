package core

import (
	"context"
	"fmt"
)

// Decision tells a resuming client what to do with one pending tool use.
type Decision int

const (
	// DecisionReuse: the effect is recorded; append its output as the result.
	DecisionReuse Decision = iota + 1
	// DecisionRun: running the tool is safe; run it, record it, append it.
	DecisionRun
	// DecisionInDoubt: the outcome is unknown; append the is_error result.
	DecisionInDoubt
)

func (d Decision) String() string {
	switch d {
	case DecisionReuse:
		return "REUSE"
	case DecisionRun:
		return "RUN"
	case DecisionInDoubt:
		return "IN_DOUBT"
	default:
		return "UNSPECIFIED"
	}
}

// Resolution is the reconcile answer for one pending tool use.
type Resolution struct {
	ToolUse  PendingToolUse
	Decision Decision
	// ToolResultText is the is_error tool result for DecisionInDoubt.
	ToolResultText string
}

// Reconcile decides each pending tool use: a recorded effect is reused (a
// DONE resolution recorded one); a tool use resolved NOT_DONE is run, with
// its idempotency key, until its new attempt is begun; a read-only or
// idempotent call is run; a side-effecting call is run only when it is
// begin-tracked and was never begun, and is in doubt otherwise.
func Reconcile(calls []PendingToolUse) []Resolution {
	out := make([]Resolution, 0, len(calls))
	for _, c := range calls {
		r := Resolution{ToolUse: c}
		switch {
		case c.Effect != nil:
			r.Decision = DecisionReuse
		case c.Resolution != nil && c.Resolution.Outcome == ResolvedNotDone && !c.Resolution.RetryBegun:
			r.Decision = DecisionRun
		case c.Class == ReadOnly || c.Class == Idempotent:
			r.Decision = DecisionRun
		case c.BeginTracked && !c.Begun:
			r.Decision = DecisionRun
		default:
			r.Decision = DecisionInDoubt
			r.ToolResultText = InDoubtText(c.ToolUse, c.Begun)
		}
		out = append(out, r)
	}
	return out
}

// Reconciliation is the answer to a session's Reconcile: its latest
// revision and one resolution for each of that revision's pending tool uses,
// in their order.
type Reconciliation struct {
	Revision    uint64
	Resolutions []Resolution
}

// ReconcileSession reads the session's pending tool uses from s and decides
// each as Reconcile does. It changes nothing in the store.
func ReconcileSession(ctx context.Context, s Store, sessionID string) (Reconciliation, error) {
	rev, calls, err := s.PendingToolUses(ctx, sessionID)
	if err != nil {
		return Reconciliation{}, err
	}
	return Reconciliation{Revision: rev, Resolutions: Reconcile(calls)}, nil
}

// ReconcileCalls decides the session's calls ids name, as the ledger knows
// them (LedgerToolUses), as Reconcile does. It changes nothing in the store.
func ReconcileCalls(ctx context.Context, s Store, sessionID string, ids []string) (Reconciliation, error) {
	rev, calls, err := s.LedgerToolUses(ctx, sessionID, ids)
	if err != nil {
		return Reconciliation{}, err
	}
	return Reconciliation{Revision: rev, Resolutions: Reconcile(calls)}, nil
}

// InDoubtText is the is_error tool result telling the model that a
// side-effecting call's outcome is unknown.
func InDoubtText(t ToolUse, begun bool) string {
	why := "the agent stopped before its outcome was recorded"
	if begun {
		why = "it was started, but the agent stopped before its outcome was recorded"
	}
	return fmt.Sprintf("The outcome of this %s call (tool_use_id %s) is unknown: %s. "+
		"It was not run again, to avoid repeating a side effect. "+
		"Check whether it took effect before retrying it.", t.Name, t.ID, why)
}
