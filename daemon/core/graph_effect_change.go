package core

import "time"

// ThreadEffectChange is a write to one call's ledger entry that a rule of
// core decides: RecordThreadEffect, ResolveThreadEffect and
// ApproveThreadEffect are each one (their Change methods). A GraphStore
// applies it in one commit under the call's locks: it reads the entry,
// answers a retry of RequestID with Replay, and otherwise stores what Apply
// makes of the entry, with the thread's update time and the request id.
type ThreadEffectChange[R any] struct {
	ThreadID, NS, ToolUseID string
	// RequestID is "" for no retry detection; Fingerprint is the request's
	// fingerprint when it has one.
	RequestID   string
	Fingerprint []byte
	// Apply is the rule: the entry to store (nil when nothing changes) and
	// the answer, for the stored entry cur (nil when the call has none).
	Apply func(cur *ThreadEffect, now time.Time) (*ThreadEffect, R, error)
	// Replay answers a retry of RequestID, cur being the entry now; a retry
	// of a call with no entry answers the zero R.
	Replay func(cur ThreadEffect) R
	// Late, when set, answers a change of a call with no entry on a deleted
	// thread (the late-write rule), storing nothing.
	Late *R
	// HiddenAbsent: a store whose thread deletes and copies are not atomic
	// (Badger) treats the entry of a thread one of them hides as absent.
	HiddenAbsent bool
}

func fingerprintOf(requestID string, f func() []byte) []byte {
	if requestID == "" {
		return nil
	}
	return f()
}

// Change is r as a ThreadEffectChange applying ApplyThreadEffectRecord; a
// retry answers AlreadyRecorded.
func (r *ThreadEffectRecord) Change() ThreadEffectChange[ThreadEffectRecordResult] {
	return ThreadEffectChange[ThreadEffectRecordResult]{
		ThreadID: r.ThreadID, NS: r.NS, ToolUseID: r.ToolUseID, RequestID: r.RequestID, Fingerprint: fingerprintOf(r.RequestID, r.Fingerprint),
		Apply: func(cur *ThreadEffect, now time.Time) (*ThreadEffect, ThreadEffectRecordResult, error) {
			return ApplyThreadEffectRecord(cur, r, now)
		},
		Replay: func(cur ThreadEffect) ThreadEffectRecordResult {
			return ThreadEffectRecordResult{Effect: cur, AlreadyRecorded: true}
		},
		Late: &ThreadEffectRecordResult{DroppedLate: true},
	}
}

// Change is r as a ThreadEffectChange applying ApplyThreadEffectResolve.
func (r *ThreadEffectResolve) Change() ThreadEffectChange[ThreadEffectResolveResult] {
	return ThreadEffectChange[ThreadEffectResolveResult]{
		ThreadID: r.ThreadID, NS: r.NS, ToolUseID: r.ToolUseID, RequestID: r.RequestID, Fingerprint: fingerprintOf(r.RequestID, r.Fingerprint),
		Apply: func(cur *ThreadEffect, now time.Time) (*ThreadEffect, ThreadEffectResolveResult, error) {
			return ApplyThreadEffectResolve(cur, r, now)
		},
		Replay:       func(cur ThreadEffect) ThreadEffectResolveResult { return ThreadEffectResolveResult{Effect: cur} },
		HiddenAbsent: true,
	}
}

// Change is r as a ThreadEffectChange applying ApplyThreadEffectApprove.
func (r *ThreadEffectApprove) Change() ThreadEffectChange[ThreadEffectApproveResult] {
	return ThreadEffectChange[ThreadEffectApproveResult]{
		ThreadID: r.ThreadID, NS: r.NS, ToolUseID: r.ToolUseID, RequestID: r.RequestID, Fingerprint: fingerprintOf(r.RequestID, r.Fingerprint),
		Apply: func(cur *ThreadEffect, now time.Time) (*ThreadEffect, ThreadEffectApproveResult, error) {
			return ApplyThreadEffectApprove(cur, r, now)
		},
		Replay:       func(cur ThreadEffect) ThreadEffectApproveResult { return ThreadEffectApproveResult{Effect: cur} },
		HiddenAbsent: true,
	}
}
