package rpc

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon/core"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// maxGraphToolUseIDLen caps a thread effect's tool use id.
const maxGraphToolUseIDLen = 256

// BeginThreadEffect implements GraphCheckpointServiceServer.
func (s *GraphServer) BeginThreadEffect(ctx context.Context, req *savepointv1.BeginThreadEffectRequest) (*savepointv1.BeginThreadEffectResponse, error) {
	b, err := validateBeginThreadEffect(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.BeginThreadEffect(ctx, b)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.BeginThreadEffectResponse{Decision: decisionToProto(res.Decision), DroppedLate: res.DroppedLate}
	if !res.DroppedLate {
		resp.Effect = threadEffectToProto(res.Effect)
	}
	if res.Duplicate != nil {
		resp.DuplicateOf, resp.ToolResultText = threadEffectToProto(*res.Duplicate), res.ToolResultText
	}
	return resp, nil
}

// RecordThreadEffect implements GraphCheckpointServiceServer.
func (s *GraphServer) RecordThreadEffect(ctx context.Context, req *savepointv1.RecordThreadEffectRequest) (*savepointv1.RecordThreadEffectResponse, error) {
	r, err := validateRecordThreadEffect(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.RecordThreadEffect(ctx, r)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.RecordThreadEffectResponse{AlreadyRecorded: res.AlreadyRecorded, DroppedLate: res.DroppedLate}
	if !res.DroppedLate {
		resp.Effect = threadEffectToProto(res.Effect)
	}
	return resp, nil
}

// ListThreadEffects implements GraphCheckpointServiceServer. A page holds
// at most page_size entries (0 means 100, more than 1000 means 1000) and
// no more output bytes than the response budget: an output that does not
// fit is sent without its data.
func (s *GraphServer) ListThreadEffects(ctx context.Context, req *savepointv1.ListThreadEffectsRequest) (*savepointv1.ListThreadEffectsResponse, error) {
	if err := validateGraphKey("thread_id", req.GetThreadId(), maxThreadIDLen, true); err != nil {
		return nil, s.fail(ctx, err)
	}
	if err := validatePageSize("page_size", req.GetPageSize()); err != nil {
		return nil, s.fail(ctx, err)
	}
	var after core.ThreadEffectKey
	if req.GetPageToken() != "" {
		var err error
		if after, err = decodeThreadEffectsToken(req.GetPageToken(), req.GetThreadId()); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	size := pageSize(req.GetPageSize())
	budget := s.lim.ResponseBudgetBytes - graphFrameMargin
	effects, err := s.store.ListThreadEffects(ctx, req.GetThreadId(), after, size+1, budget)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.ListThreadEffectsResponse{}
	for i, e := range effects {
		if i == size {
			last := effects[i-1]
			resp.NextPageToken = threadEffectsToken(req.GetThreadId(), last.NS, last.ToolUseID).encode()
			break
		}
		p := threadEffectToProto(e)
		n := proto.Size(p)
		if n > budget && p.Output != nil {
			p.Output.Data = nil // total_size still says its length
			n = proto.Size(p)
		}
		if n > budget && len(resp.Effects) > 0 {
			resp.NextPageToken = threadEffectsToken(req.GetThreadId(), effects[i-1].NS, effects[i-1].ToolUseID).encode()
			break
		}
		budget -= n
		resp.Effects = append(resp.Effects, p)
	}
	return resp, nil
}

// validateBeginThreadEffect checks a BeginThreadEffect request and returns
// it in the store's terms.
func validateBeginThreadEffect(lim Limits, req *savepointv1.BeginThreadEffectRequest) (*core.ThreadEffectBegin, error) {
	if err := validateThreadEffectKey(req); err != nil {
		return nil, err
	}
	if err := validateName("name", req.GetName(), true); err != nil {
		return nil, err
	}
	if n := len(req.GetInputJson()); n > lim.MaxStateBytes {
		return nil, fieldErr("input_json", reasonFieldTooLarge, "is %d bytes; at most %d are allowed (--max-state-bytes)", n, lim.MaxStateBytes)
	}
	if err := validateJSON("input_json", req.GetInputJson(), false); err != nil {
		return nil, err
	}
	class, ok := effectClassFromProto(req.GetEffectClass())
	if !ok {
		return nil, fieldErr("effect_class", reasonInvalidEffectClass, "%d is not a known effect class", int32(req.GetEffectClass()))
	}
	if err := validateGraphKey("checkpoint_id", req.GetCheckpointId(), maxCheckpointIDLen, false); err != nil {
		return nil, err
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	switch run := req.GetRunId(); {
	case len(run) > maxRunIDLen:
		return nil, fieldErr("run_id", reasonInvalidArgument, "is %d bytes; at most %d are allowed", len(run), maxRunIDLen)
	case !utf8.ValidString(run) || strings.IndexByte(run, 0) >= 0:
		return nil, fieldErr("run_id", reasonInvalidArgument, "must be UTF-8 text without NUL")
	}
	return &core.ThreadEffectBegin{
		ThreadID: req.GetThreadId(), NS: req.GetCheckpointNs(), ToolUseID: req.GetToolUseId(), Name: req.GetName(),
		InputJSON: req.GetInputJson(), Class: class, CheckpointID: req.GetCheckpointId(), RequestID: rid,
		Repeatable: req.GetRepeatable(), RunID: req.GetRunId(),
		RequiresApproval: req.GetRequiresApproval(),
	}, nil
}

// validateRecordThreadEffect checks a RecordThreadEffect request and
// returns it in the store's terms.
func validateRecordThreadEffect(lim Limits, req *savepointv1.RecordThreadEffectRequest) (*core.ThreadEffectRecord, error) {
	if err := validateThreadEffectKey(req); err != nil {
		return nil, err
	}
	if req.GetAttempt() == 0 {
		return nil, fieldErr("attempt", reasonMissingField, "is 0; send the attempt BeginThreadEffect returned (effect.attempts)")
	}
	if req.GetOutput() == nil {
		return nil, fieldErr("output", reasonMissingField, "is required: the tool's result, or the error it raised")
	}
	v, err := validateTypedValue("output", req.GetOutput())
	if err != nil {
		return nil, err
	}
	if n := len(v.Data); n > lim.MaxMessageBytes {
		return nil, fieldErr("output.data", reasonFieldTooLarge, "is %d bytes; at most %d are allowed (--max-message-bytes)", n, lim.MaxMessageBytes)
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &core.ThreadEffectRecord{
		ThreadID: req.GetThreadId(), NS: req.GetCheckpointNs(), ToolUseID: req.GetToolUseId(),
		Attempt: req.GetAttempt(), Output: v, IsError: req.GetIsError(), RequestID: rid,
	}, nil
}

// ResolveThreadEffect implements GraphCheckpointServiceServer.
func (s *GraphServer) ResolveThreadEffect(ctx context.Context, req *savepointv1.ResolveThreadEffectRequest) (*savepointv1.ResolveThreadEffectResponse, error) {
	r, err := validateResolveThreadEffect(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.ResolveThreadEffect(ctx, r)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.ResolveThreadEffectResponse{Effect: threadEffectToProto(res.Effect), AlreadyResolved: res.AlreadyResolved}, nil
}

// validateResolveThreadEffect checks a ResolveThreadEffect request and
// returns it in the store's terms, by ResolveEffect's rules.
func validateResolveThreadEffect(lim Limits, req *savepointv1.ResolveThreadEffectRequest) (*core.ThreadEffectResolve, error) {
	if err := validateThreadEffectKey(req); err != nil {
		return nil, err
	}
	outcome, kind, err := validateFinding(req)
	if err != nil {
		return nil, err
	}
	r := &core.ThreadEffectResolve{
		ThreadID: req.GetThreadId(), NS: req.GetCheckpointNs(), ToolUseID: req.GetToolUseId(), Outcome: outcome,
		IsError: req.GetIsError(), Note: req.GetNote(), ResolverKind: kind, ResolvedBy: req.GetResolvedBy(),
	}
	switch {
	case outcome == core.ResolvedDone && req.GetOutput() == nil:
		return nil, fieldErr("output", reasonMissingField, "is required with outcome DONE: what the tool returned")
	case outcome == core.ResolvedNotDone && req.GetOutput() != nil:
		return nil, fieldErr("output", reasonInvalidResolution, "is set with outcome NOT_DONE; a call that did not take effect has no output")
	case outcome == core.ResolvedNotDone && r.IsError:
		return nil, fieldErr("is_error", reasonInvalidResolution, "is set with outcome NOT_DONE; a call that did not take effect did not fail")
	}
	if req.GetOutput() != nil {
		if r.Output, err = validateTypedValue("output", req.GetOutput()); err != nil {
			return nil, err
		}
		if n := len(r.Output.Data); n > lim.MaxMessageBytes {
			return nil, fieldErr("output.data", reasonFieldTooLarge, "is %d bytes; at most %d are allowed (--max-message-bytes)", n, lim.MaxMessageBytes)
		}
	}
	if err := validateFindingText(r.Note, r.ResolvedBy); err != nil {
		return nil, err
	}
	if r.RequestID, err = validateRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	return r, nil
}

// ApproveThreadEffect implements GraphCheckpointServiceServer.
func (s *GraphServer) ApproveThreadEffect(ctx context.Context, req *savepointv1.ApproveThreadEffectRequest) (*savepointv1.ApproveThreadEffectResponse, error) {
	if err := validateThreadEffectKey(req); err != nil {
		return nil, s.fail(ctx, err)
	}
	d, dg, rid, err := validateApproval(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.ApproveThreadEffect(ctx, &core.ThreadEffectApprove{
		ThreadID: req.GetThreadId(), NS: req.GetCheckpointNs(), ToolUseID: req.GetToolUseId(), Decision: d,
		InputDigest: dg, DecidedBy: req.GetDecidedBy(), Note: req.GetNote(), RequestID: rid,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.ApproveThreadEffectResponse{Effect: threadEffectToProto(res.Effect), AlreadyDecided: res.AlreadyDecided}, nil
}

type threadEffectKeyRequest interface {
	GetThreadId() string
	GetCheckpointNs() string
	GetToolUseId() string
}

func validateThreadEffectKey(req threadEffectKeyRequest) error {
	if err := validateGraphKey("thread_id", req.GetThreadId(), maxThreadIDLen, true); err != nil {
		return err
	}
	if err := validateGraphKey("checkpoint_ns", req.GetCheckpointNs(), maxNSLen, false); err != nil {
		return err
	}
	return validateGraphKey("tool_use_id", req.GetToolUseId(), maxGraphToolUseIDLen, true)
}

func threadEffectToProto(e core.ThreadEffect) *savepointv1.ThreadEffect {
	p := &savepointv1.ThreadEffect{
		ThreadId: e.ThreadID, CheckpointNs: e.NS, ToolUseId: e.ToolUseID, Name: e.Name, InputJson: e.InputJSON,
		InputDigest: e.InputDigest, EffectClass: effectClassToProto(e.Class), IdempotencyKey: e.IdempotencyKey,
		Attempts: e.Attempts, State: threadEffectStateToProto(e.State), OutputDigest: e.OutputDigest,
		CheckpointId: e.CheckpointID, Resolution: resolutionToProto(e.Resolution), Approval: approvalToProto(e.Approval),
		DuplicateOf: e.DuplicateOf, RunId: e.RunID,
	}
	p.Resolutions, p.Approvals = decisionsToProto(e.EarlierResolutions, e.Resolution, e.EarlierApprovals, e.Approval)
	if !e.BeginTime.IsZero() {
		p.BeginTime = timestamppb.New(e.BeginTime)
	}
	if e.State.Recorded() {
		p.Output = &savepointv1.TypedValue{Type: e.Output.Type, Data: e.Output.Data, TotalSize: max(e.Output.Size, int64(len(e.Output.Data)))}
		if !e.RecordTime.IsZero() {
			p.RecordTime = timestamppb.New(e.RecordTime)
		}
	}
	return p
}

func threadEffectStateToProto(s core.ThreadEffectState) savepointv1.ThreadEffectState {
	switch s {
	case core.ThreadEffectBegun:
		return savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN
	case core.ThreadEffectSucceeded:
		return savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED
	case core.ThreadEffectFailed:
		return savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED
	case core.ThreadEffectNotBegun:
		return savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_NOT_BEGUN
	}
	return savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_UNSPECIFIED
}

func threadEffectsToken(thread, ns, toolUseID string) pageToken {
	return pageToken{kind: tokenThreadEffects, id: thread, ns: ns, after: toolUseID}
}

// decodeThreadEffectsToken decodes a ListThreadEffects token, checks that
// it was made for thread, and returns the last key it had returned.
func decodeThreadEffectsToken(s, thread string) (core.ThreadEffectKey, error) {
	t, err := decodePageToken(s)
	if err != nil {
		return core.ThreadEffectKey{}, err
	}
	switch {
	case t.kind != tokenThreadEffects:
		return core.ThreadEffectKey{}, fmt.Errorf("%w: not a ListThreadEffects token", core.ErrInvalidPageToken)
	case t.id != thread:
		return core.ThreadEffectKey{}, fmt.Errorf("%w: made for another thread", core.ErrInvalidPageToken)
	}
	return core.ThreadEffectKey{NS: t.ns, ToolUseID: t.after}, nil
}
