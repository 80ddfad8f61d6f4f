package core

import (
	"bytes"
	"slices"
)

// MaxDecisions bounds the resolutions, and apart the approval decisions,
// a ledger entry keeps of one call: the current one and the latest
// MaxDecisions-1 it replaced (its earlier ones), oldest first; older ones
// are dropped. A call is resolved again only after the new attempt its
// NOT_DONE resolution allowed fell in doubt too, and decided again only
// for other input, so a call rarely has more than two of either; the
// bound caps what one entry holds (a note is at most 4 KiB) however long a
// call keeps coming back.
const MaxDecisions = 16

// keepEarlier is earlier with old appended, less its oldest past
// MaxDecisions-1. It never writes into earlier's array, which a copy of
// the entry may share.
func keepEarlier[T any](earlier []T, old T) []T {
	earlier = append(slices.Clip(earlier), old)
	if n := len(earlier) - (MaxDecisions - 1); n > 0 {
		earlier = slices.Clone(earlier[n:])
	}
	return earlier
}

// setResolution makes r the current resolution *cur, keeping the one it
// replaces in *earlier.
func setResolution(cur **EffectResolution, earlier *[]EffectResolution, r *EffectResolution) {
	if *cur != nil && *cur != r {
		*earlier = keepEarlier(*earlier, **cur)
	}
	*cur = r
}

// setApproval makes a the current approval record *cur, keeping in
// *earlier the decision it replaces: an approval or a denial, unless a is
// that decision carried on (spent by a begin). A waiting record is no
// decision and is not kept.
func setApproval(cur **EffectApproval, earlier *[]EffectApproval, a *EffectApproval) {
	if old := *cur; old != nil && old.Status != ApprovalWaiting && !sameDecision(old, a) {
		*earlier = keepEarlier(*earlier, *old)
	}
	*cur = a
}

// sameDecision reports whether a and b are one decision: the same status
// for the same input, made at the same time.
func sameDecision(a, b *EffectApproval) bool {
	return b != nil && a.Status == b.Status && bytes.Equal(a.InputDigest, b.InputDigest) && a.DecideTime.Equal(b.DecideTime)
}

// AllResolutions is every resolution kept of a call, oldest first:
// earlier, then cur when set.
func AllResolutions(earlier []EffectResolution, cur *EffectResolution) []EffectResolution {
	if cur == nil {
		return earlier
	}
	return append(slices.Clip(earlier), *cur)
}

// AllApprovals is every approval decision kept of a call, oldest first:
// earlier, then cur when it is a decision (not waiting).
func AllApprovals(earlier []EffectApproval, cur *EffectApproval) []EffectApproval {
	if cur == nil || cur.Status == ApprovalWaiting {
		return earlier
	}
	return append(slices.Clip(earlier), *cur)
}
