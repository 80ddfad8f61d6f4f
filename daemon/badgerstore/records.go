package badgerstore

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// The store keeps its own record types (records.proto), so that the on-disk
// format does not move with the API. These convert the domain's types.

func toolUseRecord(t daemon.ToolUse) *storagev1.ToolUse {
	return &storagev1.ToolUse{
		ToolUseId:    t.ID,
		Name:         t.Name,
		InputJson:    t.InputJSON,
		EffectClass:  effectClassRecord(t.Class),
		BeginTracked: t.BeginTracked,
	}
}

func toolUseFromRecord(r *storagev1.ToolUse) daemon.ToolUse {
	return daemon.ToolUse{
		ID:           r.GetToolUseId(),
		Name:         r.GetName(),
		InputJSON:    r.GetInputJson(),
		Class:        effectClassFromRecord(r.GetEffectClass()),
		BeginTracked: r.GetBeginTracked(),
	}
}

func effectClassRecord(c daemon.EffectClass) storagev1.EffectClass {
	switch c {
	case daemon.ReadOnly:
		return storagev1.EffectClass_EFFECT_CLASS_READ_ONLY
	case daemon.Idempotent:
		return storagev1.EffectClass_EFFECT_CLASS_IDEMPOTENT
	default:
		return storagev1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
	}
}

// effectClassFromRecord takes an unknown class as SideEffect, the safe
// assumption.
func effectClassFromRecord(c storagev1.EffectClass) daemon.EffectClass {
	switch c {
	case storagev1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return daemon.ReadOnly
	case storagev1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return daemon.Idempotent
	default:
		return daemon.SideEffect
	}
}

// effectRecord leaves a zero RecordTime unset.
func effectRecord(e daemon.Effect) *storagev1.Effect {
	r := &storagev1.Effect{ToolUseId: e.ToolUseID, Name: e.Name, Output: e.Output, IsError: e.IsError, Late: e.Late}
	if !e.RecordTime.IsZero() {
		r.RecordTime = timestamppb.New(e.RecordTime)
	}
	return r
}

func effectFromRecord(r *storagev1.Effect) daemon.Effect {
	e := daemon.Effect{ToolUseID: r.GetToolUseId(), Name: r.GetName(), Output: r.GetOutput(), IsError: r.GetIsError(), Late: r.GetLate()}
	if r.GetRecordTime() != nil {
		e.RecordTime = r.GetRecordTime().AsTime()
	}
	return e
}

// statusFromRecord is a head's status; unspecified, every session before
// CompleteSession existed, is active.
func statusFromRecord(h *storagev1.SessionRecord) daemon.SessionStatus {
	switch h.GetStatus() {
	case storagev1.SessionStatus_SESSION_STATUS_COMPLETED:
		return daemon.StatusCompleted
	case storagev1.SessionStatus_SESSION_STATUS_FAILED:
		return daemon.StatusFailed
	default:
		return daemon.StatusActive
	}
}

func statusRecord(st daemon.SessionStatus) storagev1.SessionStatus {
	switch st {
	case daemon.StatusCompleted:
		return storagev1.SessionStatus_SESSION_STATUS_COMPLETED
	case daemon.StatusFailed:
		return storagev1.SessionStatus_SESSION_STATUS_FAILED
	default:
		return storagev1.SessionStatus_SESSION_STATUS_UNSPECIFIED
	}
}
