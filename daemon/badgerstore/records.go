package badgerstore

import (
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
	}
}

func toolUseFromRecord(r *storagev1.ToolUse) core.ToolUse {
	return core.ToolUse{
		ID:           r.GetToolUseId(),
		Name:         r.GetName(),
		InputJSON:    r.GetInputJson(),
		Class:        effectClassFromRecord(r.GetEffectClass()),
		BeginTracked: r.GetBeginTracked(),
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
	r := &storagev1.Effect{ToolUseId: e.ToolUseID, Name: e.Name, Output: e.Output, IsError: e.IsError, Late: e.Late}
	if !e.RecordTime.IsZero() {
		r.RecordTime = timestamppb.New(e.RecordTime)
	}
	return r
}

func effectFromRecord(r *storagev1.Effect) core.Effect {
	e := core.Effect{ToolUseID: r.GetToolUseId(), Name: r.GetName(), Output: r.GetOutput(), IsError: r.GetIsError(), Late: r.GetLate()}
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
