package rpc

import (
	"github.com/savepoint-dev/savepoint/daemon/core"
	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// toolUseToProto is the wire form of a tool use.
func toolUseToProto(t core.ToolUse) *savepointv1.ToolUse {
	return &savepointv1.ToolUse{
		ToolUseId:    t.ID,
		Name:         t.Name,
		InputJson:    t.InputJSON,
		EffectClass:  effectClassToProto(t.Class),
		BeginTracked: t.BeginTracked,
		Repeatable:   t.Repeatable,
	}
}

// toolUseFromProto is the domain form of a tool use; an unknown effect class
// is taken as SideEffect (requests are validated before this).
func toolUseFromProto(t *savepointv1.ToolUse) core.ToolUse {
	class, _ := effectClassFromProto(t.GetEffectClass())
	return core.ToolUse{ID: t.GetToolUseId(), Name: t.GetName(), InputJSON: t.GetInputJson(), Class: class, BeginTracked: t.GetBeginTracked(), Repeatable: t.GetRepeatable()}
}

func effectClassToProto(c core.EffectClass) savepointv1.EffectClass {
	switch c {
	case core.ReadOnly:
		return savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY
	case core.Idempotent:
		return savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT
	default:
		return savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
	}
}

// effectToProto is the wire form of an effect; a zero RecordTime is left
// unset.
func effectToProto(e core.Effect) *savepointv1.Effect {
	p := &savepointv1.Effect{
		ToolUseId: e.ToolUseID,
		Name:      e.Name,
		Output:    e.Output,
		IsError:   e.IsError,
		Late:      e.Late,
		Refused:   e.Refused,
	}
	if !e.RecordTime.IsZero() {
		p.RecordTime = timestamppb.New(e.RecordTime)
	}
	p.Resolution = resolutionToProto(e.Resolution)
	return p
}

// resolutionToProto is the wire form of a call's resolution; nil for none.
func resolutionToProto(r *core.EffectResolution) *savepointv1.EffectResolution {
	if r == nil {
		return nil
	}
	p := &savepointv1.EffectResolution{ResolvedBy: r.ResolvedBy, Note: r.Note, RetryBegun: r.RetryBegun}
	switch r.Outcome {
	case core.ResolvedDone:
		p.Outcome = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE
	case core.ResolvedNotDone:
		p.Outcome = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE
	}
	switch r.ResolverKind {
	case core.ResolverVerify:
		p.ResolverKind = savepointv1.ResolverKind_RESOLVER_KIND_VERIFY
	case core.ResolverPerson:
		p.ResolverKind = savepointv1.ResolverKind_RESOLVER_KIND_PERSON
	}
	if !r.ResolveTime.IsZero() {
		p.ResolveTime = timestamppb.New(r.ResolveTime)
	}
	return p
}

// effectFromProto is the domain form of an effect.
func effectFromProto(e *savepointv1.Effect) core.Effect {
	out := core.Effect{ToolUseID: e.GetToolUseId(), Name: e.GetName(), Output: e.GetOutput(), IsError: e.GetIsError(), Late: e.GetLate(), Refused: e.GetRefused()}
	if e.GetRecordTime() != nil {
		out.RecordTime = e.GetRecordTime().AsTime()
	}
	return out
}

// VerifyReportToProto is the wire form of a VerifyReport.
func VerifyReportToProto(rep core.VerifyReport) *savepointv1.VerifyResponse {
	resp := &savepointv1.VerifyResponse{CheckedSessions: rep.CheckedSessions, CheckedRecords: rep.CheckedRecords}
	for _, d := range rep.Damaged {
		resp.DamagedSessions = append(resp.DamagedSessions, &savepointv1.DamagedSession{SessionId: d.SessionID, Problem: d.Problem})
	}
	return resp
}

func checkpointToProto(cp core.Checkpoint) *savepointv1.Checkpoint {
	p := &savepointv1.Checkpoint{
		SessionId:    cp.SessionID,
		Revision:     cp.Revision,
		Epoch:        cp.Epoch,
		Task:         cp.Task,
		Turn:         cp.Turn,
		TokensUsed:   cp.TokensUsed,
		MessageCount: cp.MessageCount,
		StateJson:    cp.StateJSON,
		Labels:       cp.Labels,
	}
	for _, t := range cp.PendingToolUses {
		p.PendingToolUses = append(p.PendingToolUses, toolUseToProto(t))
	}
	if !cp.SaveTime.IsZero() {
		p.SaveTime = timestamppb.New(cp.SaveTime)
	}
	p.Status, p.FinalOutput = statusToProto(cp.Status), cp.FinalOutput
	if !cp.CompleteTime.IsZero() {
		p.CompleteTime = timestamppb.New(cp.CompleteTime)
	}
	if !cp.CreateTime.IsZero() {
		p.CreateTime = timestamppb.New(cp.CreateTime)
	}
	return p
}

func statusToProto(st core.SessionStatus) savepointv1.SessionStatus {
	switch st {
	case core.StatusActive:
		return savepointv1.SessionStatus_SESSION_STATUS_ACTIVE
	case core.StatusCompleted:
		return savepointv1.SessionStatus_SESSION_STATUS_COMPLETED
	case core.StatusFailed:
		return savepointv1.SessionStatus_SESSION_STATUS_FAILED
	default:
		return savepointv1.SessionStatus_SESSION_STATUS_UNSPECIFIED
	}
}

func ledgerEntryToProto(e core.LedgerEntry) *savepointv1.LedgerEntry {
	p := &savepointv1.LedgerEntry{
		ToolUseId:           e.ToolUseID,
		Name:                e.Name,
		EffectClass:         effectClassToProto(e.Class),
		BeginTracked:        e.BeginTracked,
		LastPendingRevision: e.LastPendingRevision,
		Begun:               e.Begun,
		IdempotencyKey:      e.IdempotencyKey,
		Registered:          e.Registered,
		Repeatable:          e.Repeatable,
		DuplicateOf:         e.DuplicateOf,
	}
	if !e.BeginTime.IsZero() {
		p.BeginTime = timestamppb.New(e.BeginTime)
	}
	if e.Effect != nil {
		p.Effect = effectToProto(*e.Effect)
	}
	p.Resolution = resolutionToProto(e.Resolution)
	p.Approval = approvalToProto(e.Approval)
	p.Resolutions, p.Approvals = decisionsToProto(e.EarlierResolutions, e.Resolution, e.EarlierApprovals, e.Approval)
	return p
}

// decisionsToProto is the wire form of every resolution and approval
// decision kept of a call (core.AllResolutions, core.AllApprovals).
func decisionsToProto(rs []core.EffectResolution, r *core.EffectResolution, as []core.EffectApproval, a *core.EffectApproval) ([]*savepointv1.EffectResolution, []*savepointv1.EffectApproval) {
	var pr []*savepointv1.EffectResolution
	for _, x := range core.AllResolutions(rs, r) {
		pr = append(pr, resolutionToProto(&x))
	}
	var pa []*savepointv1.EffectApproval
	for _, x := range core.AllApprovals(as, a) {
		pa = append(pa, approvalToProto(&x))
	}
	return pr, pa
}

// approvalToProto is the wire form of a call's approval record; nil for
// none.
func approvalToProto(a *core.EffectApproval) *savepointv1.EffectApproval {
	if a == nil {
		return nil
	}
	p := &savepointv1.EffectApproval{InputDigest: a.InputDigest, DecidedBy: a.DecidedBy, Note: a.Note, Spent: a.Spent}
	switch a.Status {
	case core.ApprovalWaiting:
		p.Status = savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING
	case core.ApprovalApproved:
		p.Status = savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	case core.ApprovalDenied:
		p.Status = savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED
	}
	if !a.RequestTime.IsZero() {
		p.RequestTime = timestamppb.New(a.RequestTime)
	}
	if !a.DecideTime.IsZero() {
		p.DecideTime = timestamppb.New(a.DecideTime)
	}
	return p
}

func summaryToProto(s core.SessionSummary) *savepointv1.SessionSummary {
	p := &savepointv1.SessionSummary{
		SessionId:             s.SessionID,
		Revision:              s.Revision,
		Epoch:                 s.Epoch,
		Task:                  s.Task,
		Turn:                  s.Turn,
		MessageCount:          s.MessageCount,
		PendingToolUseCount:   s.PendingToolUseCount,
		InDoubtToolUseCount:   s.InDoubtToolUseCount,
		Labels:                s.Labels,
		Status:                statusToProto(s.Status),
		ResolvedByVerifyCount: s.ResolvedByVerify,
		ResolvedByPersonCount: s.ResolvedByPerson,
		AwaitingApprovalCount: s.AwaitingApproval,
	}
	if !s.UpdateTime.IsZero() {
		p.UpdateTime = timestamppb.New(s.UpdateTime)
	}
	if !s.CreateTime.IsZero() {
		p.CreateTime = timestamppb.New(s.CreateTime)
	}
	return p
}

func messagesToProto(msgs []core.Message) []*savepointv1.Message {
	out := make([]*savepointv1.Message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, &savepointv1.Message{Role: m.Role, ContentJson: m.ContentJSON})
	}
	return out
}

func decisionToProto(d core.Decision) savepointv1.Decision {
	switch d {
	case core.DecisionReuse:
		return savepointv1.Decision_DECISION_REUSE
	case core.DecisionRun:
		return savepointv1.Decision_DECISION_RUN
	case core.DecisionInDoubt:
		return savepointv1.Decision_DECISION_IN_DOUBT
	case core.DecisionAwaitApproval:
		return savepointv1.Decision_DECISION_AWAIT_APPROVAL
	case core.DecisionDenied:
		return savepointv1.Decision_DECISION_DENIED
	default:
		return savepointv1.Decision_DECISION_UNSPECIFIED
	}
}

// duplicateToProto is the wire form of the earlier call a caught call
// repeats; nil for nil.
func duplicateToProto(d *core.Duplicate) *savepointv1.DuplicateToolUse {
	if d == nil {
		return nil
	}
	p := &savepointv1.DuplicateToolUse{ToolUseId: d.ToolUseID, Epoch: d.Epoch, IdempotencyKey: d.IdempotencyKey,
		ToolResultText: d.ToolResultText, IsError: d.IsError}
	if d.Effect != nil {
		p.Effect = effectToProto(*d.Effect)
	}
	return p
}
