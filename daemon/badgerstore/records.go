package badgerstore

import (
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// The store keeps its own record types (records.proto), so that the on-disk
// format does not move with the API. These convert the domain's types.

func toolUseRecord(t core.ToolUse) *storagev1.ToolUse {
	return &storagev1.ToolUse{
		ToolUseId:    t.ID,
		Name:         t.Name,
		InputJson:    t.InputJSON,
		EffectClass:  effectClassRecord(t.Class),
		BeginTracked: t.BeginTracked,
		Repeatable:   t.Repeatable,
	}
}

func toolUseFromRecord(r *storagev1.ToolUse) core.ToolUse {
	return core.ToolUse{
		ID:           r.GetToolUseId(),
		Name:         r.GetName(),
		InputJSON:    r.GetInputJson(),
		Class:        effectClassFromRecord(r.GetEffectClass()),
		BeginTracked: r.GetBeginTracked(),
		Repeatable:   r.GetRepeatable(),
	}
}

func effectClassRecord(c core.EffectClass) storagev1.EffectClass {
	switch c {
	case core.ReadOnly:
		return storagev1.EffectClass_EFFECT_CLASS_READ_ONLY
	case core.Idempotent:
		return storagev1.EffectClass_EFFECT_CLASS_IDEMPOTENT
	default:
		return storagev1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
	}
}

// effectClassFromRecord takes an unknown class as SideEffect, the safe
// assumption.
func effectClassFromRecord(c storagev1.EffectClass) core.EffectClass {
	switch c {
	case storagev1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return core.ReadOnly
	case storagev1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return core.Idempotent
	default:
		return core.SideEffect
	}
}

// effectRecord leaves a zero RecordTime unset.
func effectRecord(e core.Effect) *storagev1.Effect {
	r := &storagev1.Effect{ToolUseId: e.ToolUseID, Name: e.Name, Output: e.Output, IsError: e.IsError, Late: e.Late, Refused: e.Refused}
	if !e.RecordTime.IsZero() {
		r.RecordTime = timestamppb.New(e.RecordTime)
	}
	return r
}

func effectFromRecord(r *storagev1.Effect) core.Effect {
	e := core.Effect{ToolUseID: r.GetToolUseId(), Name: r.GetName(), Output: r.GetOutput(), IsError: r.GetIsError(), Late: r.GetLate(), Refused: r.GetRefused()}
	if r.GetRecordTime() != nil {
		e.RecordTime = r.GetRecordTime().AsTime()
	}
	return e
}

// statusFromRecord is a head's status; unspecified, every session before
// CompleteSession existed, is active.
func statusFromRecord(h *storagev1.SessionRecord) core.SessionStatus {
	switch h.GetStatus() {
	case storagev1.SessionStatus_SESSION_STATUS_COMPLETED:
		return core.StatusCompleted
	case storagev1.SessionStatus_SESSION_STATUS_FAILED:
		return core.StatusFailed
	default:
		return core.StatusActive
	}
}

func statusRecord(st core.SessionStatus) storagev1.SessionStatus {
	switch st {
	case core.StatusCompleted:
		return storagev1.SessionStatus_SESSION_STATUS_COMPLETED
	case core.StatusFailed:
		return storagev1.SessionStatus_SESSION_STATUS_FAILED
	default:
		return storagev1.SessionStatus_SESSION_STATUS_UNSPECIFIED
	}
}

// tsOf leaves a zero time unset.
func tsOf(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func segmentsFromRecord(segs []*storagev1.Segment) []core.Segment {
	out := make([]core.Segment, len(segs), len(segs)+1)
	for i, sg := range segs {
		out[i] = core.Segment{FirstSeq: sg.FirstSeq, Count: sg.Count}
	}
	return out
}

func segmentsRecord(segs []core.Segment) []*storagev1.Segment {
	out := make([]*storagev1.Segment, len(segs))
	for i, sg := range segs {
		out[i] = &storagev1.Segment{FirstSeq: sg.FirstSeq, Count: sg.Count}
	}
	return out
}

// headFromRecord is a head, live or tombstone, in the domain's terms; the
// labels are shared, not copied.
func headFromRecord(h *storagev1.SessionRecord) core.HeadRecord {
	return core.HeadRecord{
		Epoch: h.Epoch, Resumed: h.Resumed, Revision: h.Revision, NextSeq: h.NextSeq,
		Task: h.Task, Turn: h.Turn, MessageCount: h.MessageCount, PendingCount: h.PendingToolUseCount,
		Labels: h.Labels, Segments: segmentsFromRecord(h.Segments),
		CreateTime: timeOf(h.CreateTime), UpdateTime: timeOf(h.UpdateTime),
		Status: statusFromRecord(h), FinalOutput: h.FinalOutput, CompleteTime: timeOf(h.CompleteTime),
		ResolvedByVerify: h.ResolvedByVerify, ResolvedByPerson: h.ResolvedByPerson, AwaitingApproval: h.AwaitingApproval,
	}
}

// headRecord is a live head as stored.
func headRecord(h *core.HeadRecord) *storagev1.SessionRecord {
	return &storagev1.SessionRecord{
		Epoch: h.Epoch, Resumed: h.Resumed, Revision: h.Revision, NextSeq: h.NextSeq,
		Task: h.Task, Turn: h.Turn, MessageCount: h.MessageCount, PendingToolUseCount: h.PendingCount,
		Labels: h.Labels, Segments: segmentsRecord(h.Segments),
		CreateTime: tsOf(h.CreateTime), UpdateTime: tsOf(h.UpdateTime),
		Status: statusRecord(h.Status), FinalOutput: h.FinalOutput, CompleteTime: tsOf(h.CompleteTime),
		ResolvedByVerify: h.ResolvedByVerify, ResolvedByPerson: h.ResolvedByPerson, AwaitingApproval: h.AwaitingApproval,
	}
}

func revisionFromRecord(r *storagev1.RevisionRecord) core.RevisionRecord {
	rd := core.RevisionRecord{
		Revision: r.Revision, Epoch: r.Epoch, Task: r.Task, Turn: r.Turn, TokensUsed: r.TokensUsed,
		Segments: segmentsFromRecord(r.Segments), MessageCount: r.MessageCount, StateJSON: r.StateJson,
		Labels: r.Labels, SaveTime: timeOf(r.SaveTime),
	}
	for _, u := range r.PendingToolUses {
		rd.Pending = append(rd.Pending, toolUseFromRecord(u))
	}
	return rd
}

func revisionRecord(r *core.RevisionRecord) *storagev1.RevisionRecord {
	rec := &storagev1.RevisionRecord{
		Revision: r.Revision, Epoch: r.Epoch, Task: r.Task, Turn: r.Turn, TokensUsed: r.TokensUsed,
		Segments: segmentsRecord(r.Segments), MessageCount: r.MessageCount, StateJson: r.StateJSON,
		Labels: r.Labels, SaveTime: tsOf(r.SaveTime),
		PendingToolUses: make([]*storagev1.ToolUse, len(r.Pending)),
	}
	for i, u := range r.Pending {
		rec.PendingToolUses[i] = toolUseRecord(u)
	}
	return rec
}

// ledgerEntryRecord is a ledger entry as stored: of its tool use, only what
// RecordEffect checks (the revisions keep the input).
func ledgerEntryRecord(c *core.LedgerEntry) *storagev1.LedgerEntryRecord {
	r := &storagev1.LedgerEntryRecord{
		ToolUse:             &storagev1.ToolUse{ToolUseId: c.ToolUseID, Name: c.Name, EffectClass: effectClassRecord(c.Class), BeginTracked: c.BeginTracked},
		LastPendingRevision: c.LastPendingRevision, Begun: c.Begun, IdempotencyKey: c.IdempotencyKey, BeginTime: tsOf(c.BeginTime),
		Registered: c.Registered, InputDigest: c.InputDigest, Repeatable: c.Repeatable,
		RunEpoch: c.RunEpoch, RunRevision: c.RunRevision, DuplicateOf: c.DuplicateOf, PendingSince: c.PendingSince,
	}
	if c.Effect != nil {
		r.Effect = effectRecord(*c.Effect)
	}
	r.Resolution = resolutionRecord(c.Resolution)
	r.Approval = approvalRecord(c.Approval)
	r.EarlierResolutions, r.EarlierApprovals = earlierRecords(c.EarlierResolutions, c.EarlierApprovals)
	return r
}

// resolutionRecord is a resolution as stored, nil when there is none.
func resolutionRecord(res *core.EffectResolution) *storagev1.Resolution {
	if res == nil {
		return nil
	}
	return &storagev1.Resolution{Outcome: int32(res.Outcome), ResolverKind: int32(res.ResolverKind),
		ResolvedBy: res.ResolvedBy, Note: res.Note, ResolveTime: tsOf(res.ResolveTime), RetryBegun: res.RetryBegun}
}

// earlierRecords are a call's earlier resolutions and approvals as stored.
func earlierRecords(rs []core.EffectResolution, as []core.EffectApproval) ([]*storagev1.Resolution, []*storagev1.Approval) {
	var rr []*storagev1.Resolution
	for i := range rs {
		rr = append(rr, resolutionRecord(&rs[i]))
	}
	var ar []*storagev1.Approval
	for i := range as {
		ar = append(ar, approvalRecord(&as[i]))
	}
	return rr, ar
}

// earlierFromRecords are a call's earlier resolutions and approvals.
func earlierFromRecords(rr []*storagev1.Resolution, ar []*storagev1.Approval) ([]core.EffectResolution, []core.EffectApproval) {
	var rs []core.EffectResolution
	for _, r := range rr {
		rs = append(rs, *resolutionFromRecord(r))
	}
	var as []core.EffectApproval
	for _, a := range ar {
		as = append(as, *approvalFromRecord(a))
	}
	return rs, as
}

// approvalRecord is an approval as stored, nil when there is none.
func approvalRecord(a *core.EffectApproval) *storagev1.Approval {
	if a == nil {
		return nil
	}
	return &storagev1.Approval{Status: int32(a.Status), InputDigest: a.InputDigest, RequestTime: tsOf(a.RequestTime),
		DecidedBy: a.DecidedBy, Note: a.Note, DecideTime: tsOf(a.DecideTime), Spent: a.Spent}
}

// approvalFromRecord is a call's approval, nil when it has none.
func approvalFromRecord(r *storagev1.Approval) *core.EffectApproval {
	if r == nil {
		return nil
	}
	return &core.EffectApproval{Status: core.ApprovalStatus(r.Status), InputDigest: r.InputDigest, RequestTime: timeOf(r.RequestTime),
		DecidedBy: r.DecidedBy, Note: r.Note, DecideTime: timeOf(r.DecideTime), Spent: r.Spent}
}

// resolutionFromRecord is a call's resolution, nil when it has none.
func resolutionFromRecord(r *storagev1.Resolution) *core.EffectResolution {
	if r == nil {
		return nil
	}
	return &core.EffectResolution{Outcome: core.ResolutionOutcome(r.Outcome), ResolverKind: core.ResolverKind(r.ResolverKind),
		ResolvedBy: r.ResolvedBy, Note: r.Note, ResolveTime: timeOf(r.ResolveTime), RetryBegun: r.RetryBegun}
}

func requestFromRecord(id string, r *storagev1.RequestRecord) core.RequestRecord {
	return core.RequestRecord{RequestID: id, Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch, AlreadyBegun: r.AlreadyBegun}
}

func requestRecord(r *core.RequestRecord) *storagev1.RequestRecord {
	return &storagev1.RequestRecord{RequestId: r.RequestID, Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch, AlreadyBegun: r.AlreadyBegun}
}
