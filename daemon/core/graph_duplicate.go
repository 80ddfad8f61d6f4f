package core

import (
	"bytes"
	"fmt"
	"time"
)

// The duplicate-intent guard of a thread's ledger (docs/api.md "The thread
// ledger"). A graph thread has no epoch: a run is the process that makes
// the calls, named by the run id its client sends. An earlier, interrupted
// run's call is one begun by another run from a graph checkpoint that was
// never saved (its task ran from a step whose checkpoint, holding the
// model's message, was lost), and it is in the same turn window while no
// checkpoint of its namespace newer than that one, other than the new
// call's own, has been saved (a resumed run that got past the turn saves
// newer ones). Graph checkpoint ids order by creation, as LangGraph's
// time-ordered ids do and as the stores' "latest" checkpoint assumes.

// ThreadGuardReader is what the guard reads of a thread's namespace, in
// the begin's transaction.
type ThreadGuardReader interface {
	// EachNamespaceEffect calls fn with each ledger entry of the thread's
	// namespace, in tool use id order, until fn returns false or an error.
	EachNamespaceEffect(thread, ns string, fn func(e *ThreadEffect) (more bool, err error)) error
	// NewestCheckpointExcept returns the greatest checkpoint id of the
	// thread's namespace other than except; "" when there is none.
	NewestCheckpointExcept(thread, ns, except string) (string, error)
}

// guarded reports whether the guard applies to b: a call that is not
// read-only or repeatable, from a named run and checkpoint.
func (b *ThreadEffectBegin) guarded() bool {
	return b.Class != ReadOnly && !b.Repeatable && b.RunID != "" && b.CheckpointID != ""
}

// earlierThan reports whether e is a call of another run that b, with
// input digest digest, may repeat: the same name and input, from another
// checkpoint, and succeeded or in doubt (not failed, not found not done,
// not itself a caught duplicate). Whether e's checkpoint was saved, and
// the window, are checked apart.
func (e *ThreadEffect) earlierThan(b *ThreadEffectBegin, digest []byte) bool {
	switch {
	case e.ToolUseID == b.ToolUseID || e.DuplicateOf != "" || e.Attempts == 0 || e.Class == ReadOnly:
		return false
	case e.RunID == "" || e.RunID == b.RunID || e.CheckpointID == "" || e.CheckpointID == b.CheckpointID:
		return false
	case e.Name != b.Name || !bytes.Equal(e.InputDigest, digest):
		return false
	case e.State == ThreadEffectSucceeded:
		return true
	case e.State == ThreadEffectBegun:
		return !e.resolvedNotDone()
	}
	return false
}

// ApplyThreadEffectBeginGuarded is ApplyThreadEffectBegin with the
// duplicate-intent guard, reading the namespace through r: a first begin
// that repeats an earlier, interrupted run's call in the same turn window
// is stored as that call's duplicate, with no attempt, and answered with
// it (DecisionReuse when it succeeded, else DecisionInDoubt); every later
// begin of a caught call answers the same, from the earlier call as it is.
func ApplyThreadEffectBeginGuarded(r ThreadGuardReader, cur *ThreadEffect, b *ThreadEffectBegin, now time.Time) (*ThreadEffect, ThreadEffectBeginResult, error) {
	if cur != nil && cur.DuplicateOf != "" {
		digest, err := ThreadEffectDigest(b.Name, b.InputJSON)
		if err != nil {
			return nil, ThreadEffectBeginResult{}, fmt.Errorf("%w: input_json: %v", ErrInvalidArgument, err)
		}
		if !bytes.Equal(cur.InputDigest, digest) {
			// ApplyThreadEffectBegin words the mismatch.
			return ApplyThreadEffectBegin(cur, b, now)
		}
		e, err := threadEffectByID(r, cur.ThreadID, cur.NS, cur.DuplicateOf)
		if err != nil {
			return nil, ThreadEffectBeginResult{}, err
		}
		if e == nil {
			return nil, ThreadEffectBeginResult{}, fmt.Errorf("%w: thread %q: tool use %q is the duplicate of %q, which the ledger does not hold",
				ErrCheckpointCorrupt, cur.ThreadID, cur.ToolUseID, cur.DuplicateOf)
		}
		return nil, duplicateResult(cur, e), nil
	}
	if cur != nil || !b.guarded() {
		return ApplyThreadEffectBegin(cur, b, now)
	}
	digest, err := ThreadEffectDigest(b.Name, b.InputJSON)
	if err != nil {
		return nil, ThreadEffectBeginResult{}, fmt.Errorf("%w: input_json: %v", ErrInvalidArgument, err)
	}
	var found []*ThreadEffect
	err = r.EachNamespaceEffect(b.ThreadID, b.NS, func(e *ThreadEffect) (bool, error) {
		if e.earlierThan(b, digest) {
			found = append(found, e)
		}
		return true, nil
	})
	if err != nil {
		return nil, ThreadEffectBeginResult{}, err
	}
	var best *ThreadEffect
	if len(found) > 0 {
		newest, err := r.NewestCheckpointExcept(b.ThreadID, b.NS, b.CheckpointID)
		if err != nil {
			return nil, ThreadEffectBeginResult{}, err
		}
		for _, e := range found {
			// Saved, or a newer checkpoint saved: not a lost turn's call.
			if e.CheckpointID <= newest {
				continue
			}
			if best == nil || e.BeginTime.After(best.BeginTime) {
				best = e
			}
		}
	}
	if best == nil {
		return ApplyThreadEffectBegin(cur, b, now)
	}
	input := b.InputJSON
	if input == "" {
		input = "{}"
	}
	c := &ThreadEffect{
		ThreadID: b.ThreadID, NS: b.NS, ToolUseID: b.ToolUseID, Name: b.Name, InputJSON: input, InputDigest: digest,
		Class: b.Class, State: ThreadEffectBegun, BeginTime: now, CheckpointID: b.CheckpointID,
		DuplicateOf: best.ToolUseID, RunID: b.RunID,
	}
	return c, duplicateResult(c, best), nil
}

// duplicateResult answers a begin of c, the duplicate of e.
func duplicateResult(c, e *ThreadEffect) ThreadEffectBeginResult {
	res := ThreadEffectBeginResult{Decision: DecisionInDoubt, Effect: *c, Duplicate: e}
	recorded := e.State == ThreadEffectSucceeded
	if recorded {
		res.Decision = DecisionReuse
	}
	// The output is a value the client serialized: the client appends it,
	// decoded, to the text, which says so.
	res.ToolResultText = DuplicateText(c.Name, c.ToolUseID, e.ToolUseID, recorded, false, "")
	return res
}

// threadEffectByID finds one entry of a namespace through r; nil when none.
func threadEffectByID(r ThreadGuardReader, thread, ns, toolUseID string) (*ThreadEffect, error) {
	var out *ThreadEffect
	err := r.EachNamespaceEffect(thread, ns, func(e *ThreadEffect) (bool, error) {
		if e.ToolUseID == toolUseID {
			out = e
			return false, nil
		}
		return true, nil
	})
	return out, err
}
