package core

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
)

// The duplicate-intent guard (docs/api.md "The same action under a new
// id"): a side-effecting call begun with the same name and canonical input
// as a call that an earlier, interrupted run of the session (an older
// epoch) began or recorded in the same turn window is not run. The turn
// window is the calls begun (or recorded) at or after the session's latest
// revision saved with no pending tool use: the last point at which every
// earlier tool result was in the saved history the model is asked from.

// InputDigest returns the SHA-256 of a tool's name and the canonical form
// of its input (CanonicalJSON); input that is not JSON is digested as it
// is, so a digest exists for every call.
func InputDigest(name, inputJSON string) []byte {
	c, err := CanonicalJSON(inputJSON)
	if err != nil {
		c = inputJSON
	}
	h := sha256.New()
	writeStrings(h, "tool-use-input", name, c)
	return h.Sum(nil)
}

// guarded reports whether the guard applies to c's first begin: a call that
// is not read-only, not repeatable, with a known input, never begun,
// recorded or caught before.
func (c *LedgerEntry) guarded() bool {
	return c.Class != ReadOnly && !c.Repeatable && len(c.InputDigest) > 0 && !c.Begun && c.Effect == nil && c.DuplicateOf == ""
}

// stampRun sets the run c belongs to, the first time it is begun or
// recorded: the owner's epoch and the latest revision.
func (c *LedgerEntry) stampRun(h *HeadRecord) {
	if c.RunRevision == 0 {
		c.RunEpoch, c.RunRevision = h.Epoch, h.Revision
	}
}

// earlier reports whether e is a call of an interrupted run that c, begun
// now by the owner of epoch h.Epoch, may repeat: the same name and input,
// begun or recorded under an older epoch, neither refused nor found not
// done, and not itself a caught duplicate. The turn window is checked
// apart.
func (e *LedgerEntry) earlier(c *LedgerEntry, h *HeadRecord) bool {
	switch {
	case e.ToolUseID == c.ToolUseID || e.DuplicateOf != "" || e.RunRevision == 0 || e.RunEpoch >= h.Epoch:
		return false
	case e.Name != c.Name || !bytes.Equal(e.InputDigest, c.InputDigest):
		return false
	case e.PendingSince > 0 && c.PendingSince > 0 && e.PendingSince <= c.LastPendingRevision && c.PendingSince <= e.LastPendingRevision:
		// Both were pending in one saved revision: two calls of one saved
		// model reply, which a resumed run answers by their own ids.
		return false
	case e.Effect != nil:
		return !e.Effect.Refused
	case e.Begun:
		r := e.Resolution
		return r == nil || r.Outcome != ResolvedNotDone || r.RetryBegun
	}
	return false
}

// findDuplicate returns the earlier call of an interrupted run, in the same
// turn window, that c repeats, or nil; when several match, the last begun.
// It reads the session's ledger only when the session was resumed (no
// older epoch exists before), and its revisions only when a call matches.
func findDuplicate(t Txn, sid string, h *HeadRecord, c *LedgerEntry) (*LedgerEntry, error) {
	if !h.Resumed || !c.guarded() {
		return nil, nil
	}
	var found []*LedgerEntry
	err := t.EachLedgerEntry(sid, func(e *LedgerEntry) (bool, error) {
		if e.earlier(c, h) {
			found = append(found, e)
		}
		return true, nil
	})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	start, err := turnWindowStart(t, sid, h)
	if err != nil {
		return nil, err
	}
	var best *LedgerEntry
	for _, e := range found {
		if e.RunRevision < start {
			continue
		}
		if best == nil || e.RunRevision > best.RunRevision || (e.RunRevision == best.RunRevision && e.BeginTime.After(best.BeginTime)) {
			best = e
		}
	}
	return best, nil
}

// turnWindowStart returns the session's latest revision saved with no
// pending tool use, or the oldest kept revision when every kept one has
// some.
func turnWindowStart(t Txn, sid string, h *HeadRecord) (uint64, error) {
	if h.PendingCount == 0 {
		return h.Revision, nil
	}
	for rev := h.Revision - 1; rev >= 1; rev-- {
		r, err := t.Revision(sid, h, rev)
		if errors.Is(err, ErrRevisionNotFound) {
			return rev + 1, nil
		}
		if err != nil {
			return 0, err
		}
		if len(r.Pending) == 0 {
			return rev, nil
		}
	}
	return 1, nil
}

// catchDuplicate marks c, about to be begun for the first time, as the
// duplicate of the earlier call it repeats, staging the entry, and returns
// the answer; nil when the guard lets it run.
func catchDuplicate(t Txn, sid string, h *HeadRecord, c *LedgerEntry) (*Duplicate, error) {
	e, err := findDuplicate(t, sid, h, c)
	if err != nil || e == nil {
		return nil, err
	}
	c.DuplicateOf = e.ToolUseID
	if err := t.PutLedgerEntry(sid, c); err != nil {
		return nil, err
	}
	return duplicateOf(c, e), nil
}

// caughtDuplicate answers a begin of c, a call the guard caught before,
// with its earlier call as it is now.
func caughtDuplicate(t Txn, sid string, h *HeadRecord, c *LedgerEntry) (*Duplicate, error) {
	e, err := t.LedgerEntry(sid, c.DuplicateOf)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, Corrupt(h, sid, fmt.Errorf("tool use %q is the duplicate of %q, which the ledger does not hold", c.ToolUseID, c.DuplicateOf))
	}
	return duplicateOf(c, e), nil
}

// duplicateOf is the answer to a begin of c, the duplicate of e.
func duplicateOf(c, e *LedgerEntry) *Duplicate {
	d := &Duplicate{ToolUseID: e.ToolUseID, Epoch: e.RunEpoch, IdempotencyKey: e.IdempotencyKey, IsError: true}
	if e.Effect != nil {
		eff := *e.Effect
		if e.Resolution != nil && e.Resolution.Outcome == ResolvedDone {
			eff.Resolution = e.Resolution
		}
		d.Effect = &eff
		d.IsError = eff.IsError
	}
	d.ToolResultText = DuplicateText(c.Name, c.ToolUseID, e.ToolUseID, d.Effect != nil, d.IsError, effectOutput(d.Effect))
	return d
}

func effectOutput(e *Effect) string {
	if e == nil {
		return ""
	}
	return e.Output
}

// DuplicateText is the tool result for a call the duplicate-intent guard
// caught: call toolUseID of tool name repeats earlier, which an earlier run
// recorded (with its output, an error when failed) or left in doubt
// (recorded false). It is the one text every client gives the model.
func DuplicateText(name, toolUseID, earlier string, recorded, failed bool, output string) string {
	head := fmt.Sprintf("This %s call (tool_use_id %s) was not run: the same call, with the same input, was made as tool_use_id %s "+
		"by an earlier run of this agent that stopped before its result was saved. ", name, toolUseID, earlier)
	switch {
	case !recorded:
		return head + "Its outcome is unknown: it may have taken effect. It was not run again, to avoid repeating a side effect. " +
			"Check whether it took effect before retrying it."
	case failed:
		return head + "It failed, with this error: " + output
	case output == "":
		// A thread's call: the client appends the output it decodes.
		return head + "It was already taken, and returned:\n"
	default:
		return head + "It was already taken, and returned: " + output
	}
}

// result is the BeginResult answering a caught call: not begun, no key,
// DecisionReuse when the earlier call's effect is recorded and
// DecisionInDoubt when it is not. With remember, put (the request id's
// record) is staged first.
func (d *Duplicate) result(remember bool, put func() error) (BeginResult, error) {
	if remember {
		if err := put(); err != nil {
			return BeginResult{}, err
		}
	}
	dec := DecisionInDoubt
	if d.Effect != nil {
		dec = DecisionReuse
	}
	return BeginResult{Decision: dec, Duplicate: d}, nil
}
