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
	}
}

// toolUseFromProto is the domain form of a tool use; an unknown effect class
// is taken as SideEffect (requests are validated before this).
func toolUseFromProto(t *savepointv1.ToolUse) core.ToolUse {
	class, _ := effectClassFromProto(t.GetEffectClass())
	return core.ToolUse{ID: t.GetToolUseId(), Name: t.GetName(), InputJSON: t.GetInputJson(), Class: class, BeginTracked: t.GetBeginTracked()}
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
	}
	if !e.RecordTime.IsZero() {
		p.RecordTime = timestamppb.New(e.RecordTime)
	}
	return p
}

// effectFromProto is the domain form of an effect.
func effectFromProto(e *savepointv1.Effect) core.Effect {
	out := core.Effect{ToolUseID: e.GetToolUseId(), Name: e.GetName(), Output: e.GetOutput(), IsError: e.GetIsError(), Late: e.GetLate()}
	if e.GetRecordTime() != nil {
		out.RecordTime = e.GetRecordTime().AsTime()
	}
	return out
}
