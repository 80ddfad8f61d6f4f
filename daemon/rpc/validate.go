package rpc

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The reasons of the *fieldError values validation and the request codec
// return.
const (
	reasonInvalidSessionID     = savepointv1.ErrorReason_ERROR_REASON_INVALID_SESSION_ID
	reasonInvalidToolUseID     = savepointv1.ErrorReason_ERROR_REASON_INVALID_TOOL_USE_ID
	reasonInvalidRequestID     = savepointv1.ErrorReason_ERROR_REASON_INVALID_REQUEST_ID
	reasonMissingField         = savepointv1.ErrorReason_ERROR_REASON_MISSING_FIELD
	reasonInvalidJSON          = savepointv1.ErrorReason_ERROR_REASON_INVALID_JSON
	reasonMessageTooLarge      = savepointv1.ErrorReason_ERROR_REASON_MESSAGE_TOO_LARGE
	reasonStateTooLarge        = savepointv1.ErrorReason_ERROR_REASON_STATE_TOO_LARGE
	reasonInvalidEffectClass   = savepointv1.ErrorReason_ERROR_REASON_INVALID_EFFECT_CLASS
	reasonDuplicateToolUseID   = savepointv1.ErrorReason_ERROR_REASON_DUPLICATE_TOOL_USE_ID
	reasonToolUseIDMismatch    = savepointv1.ErrorReason_ERROR_REASON_TOOL_USE_ID_MISMATCH
	reasonInvalidLabel         = savepointv1.ErrorReason_ERROR_REASON_INVALID_LABEL
	reasonInvalidPageSize      = savepointv1.ErrorReason_ERROR_REASON_INVALID_PAGE_SIZE
	reasonFieldTooLarge        = savepointv1.ErrorReason_ERROR_REASON_FIELD_TOO_LARGE
	reasonInvalidUTF8          = savepointv1.ErrorReason_ERROR_REASON_INVALID_UTF8
	reasonInvalidSessionStatus = savepointv1.ErrorReason_ERROR_REASON_INVALID_SESSION_STATUS
	reasonInvalidOrderBy       = savepointv1.ErrorReason_ERROR_REASON_INVALID_ORDER_BY
	reasonInvalidResolution    = savepointv1.ErrorReason_ERROR_REASON_INVALID_RESOLUTION
	reasonInvalidApproval      = savepointv1.ErrorReason_ERROR_REASON_INVALID_APPROVAL
)

// Caps on fields that no sane client comes near.
const (
	maxSessionIDLen  = 128
	maxToolUseIDLen  = 512
	maxTaskBytes     = 64 << 10
	maxNameBytes     = 256 // tool names and message roles
	maxLabels        = 64
	maxLabelKeyLen   = 63
	maxLabelValueLen = 256
	maxNoteBytes     = 4096 // a resolution's note
)

func fieldErr(field string, reason savepointv1.ErrorReason, format string, args ...any) *fieldError {
	return &fieldError{Field: field, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// validateSessionID checks a session id: 1-128 characters of
// [A-Za-z0-9._:-], starting with a letter or digit.
func validateSessionID(field, id string) error {
	if id == "" {
		return fieldErr(field, reasonInvalidSessionID, "is empty; give the session's id")
	}
	if len(id) > maxSessionIDLen {
		return fieldErr(field, reasonInvalidSessionID, "is %d characters; at most %d are allowed", len(id), maxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fieldErr(field, reasonInvalidSessionID, "must start with a letter or digit")
		}
		if !alnum && c != '.' && c != '_' && c != ':' && c != '-' {
			return fieldErr(field, reasonInvalidSessionID, "may hold only letters, digits and . _ : -")
		}
	}
	return nil
}

// validateToolUseID checks a tool use id: non-empty valid UTF-8 of at most
// 512 bytes without NUL.
func validateToolUseID(field, id string) error {
	switch {
	case id == "":
		return fieldErr(field, reasonInvalidToolUseID, "is empty; give the provider's tool use id")
	case len(id) > maxToolUseIDLen:
		return fieldErr(field, reasonInvalidToolUseID, "is %d bytes; at most %d are allowed", len(id), maxToolUseIDLen)
	case !utf8.ValidString(id):
		return fieldErr(field, reasonInvalidToolUseID, "is not valid UTF-8")
	case strings.IndexByte(id, 0) >= 0:
		return fieldErr(field, reasonInvalidToolUseID, "must not contain NUL")
	}
	return nil
}

// validateRequestID checks a request id and returns it in canonical form:
// empty, or a UUID.
func validateRequestID(field, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fieldErr(field, reasonInvalidRequestID, "is not a UUID; send a new random UUID per save, or leave it empty")
	}
	if len(id) == 36 && !strings.ContainsFunc(id, func(r rune) bool { return r >= 'A' && r <= 'Z' }) {
		return id, nil // canonical already, as clients send it: no copy
	}
	return u.String(), nil
}

// validateJSON checks that s is JSON text (validJSON); empty passes unless
// required.
func validateJSON(field, s string, required bool) error {
	if s == "" {
		if required {
			return fieldErr(field, reasonInvalidJSON, "is empty; send the content as JSON text")
		}
		return nil
	}
	if !validJSON(s) {
		return fieldErr(field, reasonInvalidJSON, "is not valid JSON")
	}
	return nil
}

// validateName checks a required short name such as a role or tool name.
func validateName(field, s string, required bool) error {
	if s == "" && required {
		return fieldErr(field, reasonMissingField, "is required")
	}
	if len(s) > maxNameBytes {
		return fieldErr(field, reasonFieldTooLarge, "is %d bytes; at most %d are allowed", len(s), maxNameBytes)
	}
	return nil
}

// validateLabels checks a label map: at most 64 pairs, keys of 1-63
// characters of [a-z0-9_.-], values of at most 256 bytes.
func validateLabels(field string, labels map[string]string) error {
	if len(labels) > maxLabels {
		return fieldErr(field, reasonInvalidLabel, "has %d labels; at most %d are allowed", len(labels), maxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == "" || len(k) > maxLabelKeyLen {
			return fieldErr(field, reasonInvalidLabel, "key %q must be 1-%d characters", k, maxLabelKeyLen)
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				return fieldErr(field, reasonInvalidLabel, "key %q may hold only a-z, 0-9 and _ . -", k)
			}
		}
		if v := labels[k]; len(v) > maxLabelValueLen {
			return fieldErr(field, reasonInvalidLabel, "value of %q is %d bytes; at most %d are allowed", k, len(v), maxLabelValueLen)
		}
	}
	return nil
}

func validatePageSize(field string, n int32) error {
	if n < 0 {
		return fieldErr(field, reasonInvalidPageSize, "is negative; use 0 for the default")
	}
	return nil
}

// fixedSize is the number of bytes a checkpoint counts for against a
// response budget, without its messages.
func fixedSize(task, stateJSON string, labels map[string]string, pending []core.ToolUse) int {
	n := 512 + len(task) + len(stateJSON) // 512 for the ids, numbers and framing
	for k, v := range labels {
		n += len(k) + len(v) + 16
	}
	for _, t := range pending {
		n += len(t.ID) + len(t.Name) + len(t.InputJSON) + 16
	}
	return n
}

func effectClassFromProto(c savepointv1.EffectClass) (core.EffectClass, bool) {
	switch c {
	case savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT:
		return core.SideEffect, true
	case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return core.ReadOnly, true
	case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return core.Idempotent, true
	}
	return 0, false
}

// validateSave checks a SaveCheckpoint request against lim and
// returns it as a SaveRequest. Beyond each field's own limits, the
// checkpoint without its messages must fit the response budget, so that
// Resume can always return it.
func validateSave(lim Limits, req *savepointv1.SaveCheckpointRequest) (*core.SaveRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	requestID, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if len(req.GetTask()) > maxTaskBytes {
		return nil, fieldErr("task", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", len(req.GetTask()), maxTaskBytes)
	}
	if n := len(req.GetAppendMessages()); n > core.MaxAppendMessages {
		return nil, fieldErr("append_messages", reasonFieldTooLarge, "has %d messages; at most %d are allowed per save: save in several steps", n, core.MaxAppendMessages)
	}
	if n := len(req.GetPendingToolUses()); n > core.MaxPendingToolUses {
		return nil, fieldErr("pending_tool_uses", reasonFieldTooLarge, "has %d tool uses; at most %d are allowed", n, core.MaxPendingToolUses)
	}
	msgs := make([]core.Message, 0, len(req.GetAppendMessages()))
	for i, m := range req.GetAppendMessages() {
		msg, err := validateMessage(lim, m)
		if err != nil {
			return nil, inField(err, fmt.Sprintf("append_messages[%d]", i))
		}
		msgs = append(msgs, msg)
	}
	pending := make([]core.ToolUse, 0, len(req.GetPendingToolUses()))
	seen := make(map[string]bool, len(req.GetPendingToolUses()))
	for i, t := range req.GetPendingToolUses() {
		tu, err := validateToolUse(lim, t)
		if err != nil {
			return nil, inField(err, fmt.Sprintf("pending_tool_uses[%d]", i))
		}
		if seen[tu.ID] {
			return nil, fieldErr(fmt.Sprintf("pending_tool_uses[%d].tool_use_id", i), reasonDuplicateToolUseID, "names a tool use already listed; list each pending tool use once")
		}
		seen[tu.ID] = true
		pending = append(pending, tu)
	}
	if n := len(req.GetStateJson()); n > lim.MaxStateBytes {
		return nil, fieldErr("state_json", reasonStateTooLarge, "is %d bytes; at most %d are allowed", n, lim.MaxStateBytes)
	}
	if err := validateJSON("state_json", req.GetStateJson(), false); err != nil {
		return nil, err
	}
	if err := validateLabels("labels", req.GetLabels()); err != nil {
		return nil, err
	}
	if n := fixedSize(req.GetTask(), req.GetStateJson(), req.GetLabels(), pending); n > lim.ResponseBudgetBytes {
		return nil, fieldErr("pending_tool_uses", reasonFieldTooLarge,
			"with task, state_json and labels makes %d bytes, over the %d-byte response budget; send smaller tool inputs or state",
			n, lim.ResponseBudgetBytes)
	}
	return &core.SaveRequest{
		SessionID:        req.GetSessionId(),
		ExpectedRevision: req.GetExpectedRevision(),
		Epoch:            req.GetEpoch(),
		RequestID:        requestID,
		Task:             req.GetTask(),
		Turn:             req.GetTurn(),
		TokensUsed:       req.GetTokensUsed(),
		KeepMessages:     req.KeepMessages,
		AppendMessages:   msgs,
		PendingToolUses:  pending,
		StateJSON:        req.GetStateJson(),
		Labels:           req.GetLabels(),
	}, nil
}

// validateMessage checks a message to append and returns it. Its errors
// name fields relative to the message ("role"); the caller places them
// (inField).
func validateMessage(lim Limits, m *savepointv1.Message) (core.Message, error) {
	if err := validateName("role", m.GetRole(), true); err != nil {
		return core.Message{}, err
	}
	if n := len(m.GetContentJson()); n > lim.MaxMessageBytes {
		return core.Message{}, fieldErr("content_json", reasonMessageTooLarge,
			"is %d bytes; at most %d are allowed per message", n, lim.MaxMessageBytes)
	}
	if err := validateJSON("content_json", m.GetContentJson(), true); err != nil {
		return core.Message{}, err
	}
	return core.Message{Role: m.GetRole(), ContentJSON: m.GetContentJson()}, nil
}

// inField returns err with its field, when it is a *fieldError, named as a
// field of parent ("parent.field"). Validation names nested fields only
// for an error, so that a valid request builds no field names.
func inField(err error, parent string) error {
	if fe, ok := err.(*fieldError); ok {
		fe.Field = parent + "." + fe.Field
	}
	return err
}

// An input is capped like state_json, so that one Reconcile resolution (the
// input and a recorded output of at most MaxMessageBytes) always fits a
// response, as Config.Validate ensures for state and a message.
// Its errors name fields relative to the tool use ("name"); the caller
// places them (inField).
func validateToolUse(lim Limits, t *savepointv1.ToolUse) (core.ToolUse, error) {
	if err := validateToolUseID("tool_use_id", t.GetToolUseId()); err != nil {
		return core.ToolUse{}, err
	}
	if err := validateName("name", t.GetName(), true); err != nil {
		return core.ToolUse{}, err
	}
	if n := len(t.GetInputJson()); n > lim.MaxStateBytes {
		return core.ToolUse{}, fieldErr("input_json", reasonFieldTooLarge, "is %d bytes; at most %d are allowed (--max-state-bytes)", n, lim.MaxStateBytes)
	}
	if err := validateJSON("input_json", t.GetInputJson(), false); err != nil {
		return core.ToolUse{}, err
	}
	class, ok := effectClassFromProto(t.GetEffectClass())
	if !ok {
		return core.ToolUse{}, fieldErr("effect_class", reasonInvalidEffectClass,
			"%d is not a known effect class", int32(t.GetEffectClass()))
	}
	return core.ToolUse{
		ID:           t.GetToolUseId(),
		Name:         t.GetName(),
		InputJSON:    t.GetInputJson(),
		Class:        class,
		BeginTracked: t.GetBeginTracked(),
		Repeatable:   t.GetRepeatable(),
	}, nil
}

// validateRecord checks a RecordEffect request and returns its effect.
func validateRecord(lim Limits, req *savepointv1.RecordEffectRequest) (core.Effect, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return core.Effect{}, err
	}
	if err := validateToolUseID("tool_use_id", req.GetToolUseId()); err != nil {
		return core.Effect{}, err
	}
	if err := validateName("name", req.GetName(), false); err != nil {
		return core.Effect{}, err
	}
	if n := len(req.GetOutput()); n > lim.MaxMessageBytes {
		return core.Effect{}, fieldErr("output", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, lim.MaxMessageBytes)
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return core.Effect{}, err
	}
	return core.Effect{
		ToolUseID: req.GetToolUseId(),
		Name:      req.GetName(),
		Output:    req.GetOutput(),
		IsError:   req.GetIsError(),
		Refused:   req.GetRefused(),
		RequestID: rid,
	}, nil
}

// validateResolve checks a ResolveEffect request and returns it in the
// domain's terms.
func validateResolve(lim Limits, req *savepointv1.ResolveEffectRequest) (*core.ResolveRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := validateToolUseID("tool_use_id", req.GetToolUseId()); err != nil {
		return nil, err
	}
	outcome, kind, err := validateFinding(req)
	if err != nil {
		return nil, err
	}
	r := &core.ResolveRequest{
		SessionID: req.GetSessionId(), ToolUseID: req.GetToolUseId(), Epoch: req.Epoch, Outcome: outcome, ResolverKind: kind,
		Output: req.GetOutput(), IsError: req.GetIsError(), Note: req.GetNote(), ResolvedBy: req.GetResolvedBy(),
		RequestID: req.GetRequestId(),
	}
	if r.Outcome == core.ResolvedNotDone {
		if r.Output != "" {
			return nil, fieldErr("output", reasonInvalidResolution, "is set with outcome NOT_DONE; a call that did not take effect has no output")
		}
		if r.IsError {
			return nil, fieldErr("is_error", reasonInvalidResolution, "is set with outcome NOT_DONE; a call that did not take effect did not fail")
		}
	}
	if n := len(r.Output); n > lim.MaxMessageBytes {
		return nil, fieldErr("output", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, lim.MaxMessageBytes)
	}
	if err := validateFindingText(r.Note, r.ResolvedBy); err != nil {
		return nil, err
	}
	if r.RequestID, err = validateRequestID("request_id", r.RequestID); err != nil {
		return nil, err
	}
	return r, nil
}

// finding is what ResolveEffect and ResolveThreadEffect requests share.
type finding interface {
	GetOutcome() savepointv1.ResolutionOutcome
	GetResolverKind() savepointv1.ResolverKind
}

// validateFinding checks a resolution's outcome and resolver kind.
func validateFinding(req finding) (core.ResolutionOutcome, core.ResolverKind, error) {
	var o core.ResolutionOutcome
	switch req.GetOutcome() {
	case savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_UNSPECIFIED:
		return 0, 0, fieldErr("outcome", reasonMissingField, "is unspecified; give DONE or NOT_DONE")
	case savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE:
		o = core.ResolvedDone
	case savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE:
		o = core.ResolvedNotDone
	default:
		return 0, 0, fieldErr("outcome", reasonInvalidResolution, "%d is not a known outcome", int32(req.GetOutcome()))
	}
	switch req.GetResolverKind() {
	case savepointv1.ResolverKind_RESOLVER_KIND_UNSPECIFIED:
		return 0, 0, fieldErr("resolver_kind", reasonMissingField, "is unspecified; give VERIFY or PERSON")
	case savepointv1.ResolverKind_RESOLVER_KIND_VERIFY:
		return o, core.ResolverVerify, nil
	case savepointv1.ResolverKind_RESOLVER_KIND_PERSON:
		return o, core.ResolverPerson, nil
	}
	return 0, 0, fieldErr("resolver_kind", reasonInvalidResolution, "%d is not a known resolver kind", int32(req.GetResolverKind()))
}

// validateFindingText checks a resolution's note and resolver name.
func validateFindingText(note, resolvedBy string) error {
	if n := len(note); n > maxNoteBytes {
		return fieldErr("note", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, maxNoteBytes)
	}
	if n := len(resolvedBy); n > maxNameBytes {
		return fieldErr("resolved_by", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, maxNameBytes)
	}
	return nil
}

// validateBegin checks a BeginEffect request and, when it registers a tool
// use (tool_use set), returns the registration.
func validateBegin(lim Limits, req *savepointv1.BeginEffectRequest) (*core.RegisterRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := validateToolUseID("tool_use_id", req.GetToolUseId()); err != nil {
		return nil, err
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	pu := req.GetToolUse()
	if pu == nil {
		return nil, nil // Begin's rules: the request id goes with them
	}
	if id := pu.GetToolUseId(); id != "" && id != req.GetToolUseId() {
		return nil, fieldErr("tool_use.tool_use_id", reasonToolUseIDMismatch, "is %q, but tool_use_id is %q; name one tool use", id, req.GetToolUseId())
	}
	pu = proto.CloneOf(pu)
	pu.ToolUseId = req.GetToolUseId()
	u, err := validateToolUse(lim, pu)
	if err != nil {
		return nil, inField(err, "tool_use")
	}
	return &core.RegisterRequest{SessionID: req.GetSessionId(), ToolUse: u, Epoch: req.GetEpoch(), RequestID: rid,
		RequiresApproval: req.GetRequiresApproval()}, nil
}

// approval is what ApproveEffect and ApproveThreadEffect requests share.
type approval interface {
	GetDecision() savepointv1.ApprovalStatus
	GetInputDigest() []byte
	GetDecidedBy() string
	GetNote() string
	GetRequestId() string
}

// validateApproval checks a decision's fields and returns the decision,
// the digest (nil when not given) and the request id.
func validateApproval(req approval) (core.ApprovalStatus, []byte, string, error) {
	var d core.ApprovalStatus
	switch req.GetDecision() {
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_UNSPECIFIED:
		return 0, nil, "", fieldErr("decision", reasonMissingField, "is unspecified; give APPROVED or DENIED")
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		d = core.ApprovalApproved
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED:
		d = core.ApprovalDenied
	default:
		return 0, nil, "", fieldErr("decision", reasonInvalidApproval, "%s is not a decision; give APPROVED or DENIED", req.GetDecision())
	}
	dg := req.GetInputDigest()
	if len(dg) == 0 {
		dg = nil
	} else if len(dg) != 32 {
		return 0, nil, "", fieldErr("input_digest", reasonInvalidApproval, "is %d bytes; a SHA-256 digest is 32", len(dg))
	}
	if n := len(req.GetNote()); n > maxNoteBytes {
		return 0, nil, "", fieldErr("note", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, maxNoteBytes)
	}
	if n := len(req.GetDecidedBy()); n > maxNameBytes {
		return 0, nil, "", fieldErr("decided_by", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", n, maxNameBytes)
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	return d, dg, rid, err
}

// validateApprove checks an ApproveEffect request and returns it in the
// domain's terms.
func validateApprove(req *savepointv1.ApproveEffectRequest) (*core.ApproveRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := validateToolUseID("tool_use_id", req.GetToolUseId()); err != nil {
		return nil, err
	}
	d, dg, rid, err := validateApproval(req)
	if err != nil {
		return nil, err
	}
	return &core.ApproveRequest{SessionID: req.GetSessionId(), ToolUseID: req.GetToolUseId(), Epoch: req.Epoch, Decision: d,
		InputDigest: dg, DecidedBy: req.GetDecidedBy(), Note: req.GetNote(), RequestID: rid}, nil
}

// validateReconcile checks a Reconcile request's tool use ids: at most
// core.MaxPendingToolUses, each valid and listed once.
func validateReconcile(req *savepointv1.ReconcileRequest) error {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return err
	}
	ids := req.GetToolUseIds()
	if len(ids) > core.MaxPendingToolUses {
		return fieldErr("tool_use_ids", reasonInvalidArgument, "lists %d tool uses; at most %d are allowed", len(ids), core.MaxPendingToolUses)
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		field := fmt.Sprintf("tool_use_ids[%d]", i)
		if err := validateToolUseID(field, id); err != nil {
			return err
		}
		if seen[id] {
			return fieldErr(field, reasonDuplicateToolUseID, "names a tool use already listed; list each once")
		}
		seen[id] = true
	}
	return nil
}

func validateListMessages(req *savepointv1.ListMessagesRequest) error {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return err
	}
	return validatePageSize("page_size", req.GetPageSize())
}

// validateListSessions checks a ListSessions request and returns its
// filter, with min_idle taken back from now.
func validateListSessions(req *savepointv1.ListSessionsRequest, now time.Time) (core.SessionFilter, error) {
	if err := validatePageSize("page_size", req.GetPageSize()); err != nil {
		return core.SessionFilter{}, err
	}
	f, idle, err := validateFilter(req.GetLabelFilter(), req.GetStatusFilter(), req.GetHasPendingToolUses(), req.GetMinIdle())
	if err != nil {
		return core.SessionFilter{}, err
	}
	if idle > 0 {
		f.UpdatedBefore = now.Add(-idle)
	}
	return f, nil
}

// The orders ListSessions' order_by names.
const (
	orderBySessionID  = "session_id"
	orderByUpdateDesc = "update_time desc"
)

// validateOrderBy checks ListSessions' order_by and reports whether it asks
// for the last update first.
func validateOrderBy(orderBy string) (byUpdate bool, err error) {
	switch orderBy {
	case "", orderBySessionID:
		return false, nil
	case orderByUpdateDesc:
		return true, nil
	}
	return false, fieldErr("order_by", reasonInvalidOrderBy, "is %q; give %q (the default) or %q", orderBy, orderBySessionID, orderByUpdateDesc)
}

// validateFilter checks the session filters ListSessions and WatchSessions
// share and returns them, with min_idle apart (0: unset).
func validateFilter(labels map[string]string, status savepointv1.SessionStatus, hasPending bool, minIdle *durationpb.Duration) (core.SessionFilter, time.Duration, error) {
	if err := validateLabels("label_filter", labels); err != nil {
		return core.SessionFilter{}, 0, err
	}
	f := core.SessionFilter{Labels: labels, HasPendingToolUses: hasPending}
	var ok bool
	if f.Status, ok = statusFromProto(status); !ok {
		return core.SessionFilter{}, 0, fieldErr("status_filter", reasonInvalidSessionStatus,
			"%d is not a session status", int32(status))
	}
	if minIdle == nil {
		return f, 0, nil
	}
	if err := minIdle.CheckValid(); err != nil {
		return core.SessionFilter{}, 0, fieldErr("min_idle", reasonInvalidArgument, "is not a valid duration: %v", err)
	}
	idle := minIdle.AsDuration()
	if idle < 0 {
		return core.SessionFilter{}, 0, fieldErr("min_idle", reasonInvalidArgument, "is negative; give how long a session has not been updated, or leave it unset")
	}
	return f, idle, nil
}

// statusFromProto returns the status a filter names; ok is false for a
// value the enum does not define.
func statusFromProto(s savepointv1.SessionStatus) (core.SessionStatus, bool) {
	switch s {
	case savepointv1.SessionStatus_SESSION_STATUS_UNSPECIFIED:
		return core.StatusAny, true
	case savepointv1.SessionStatus_SESSION_STATUS_ACTIVE:
		return core.StatusActive, true
	case savepointv1.SessionStatus_SESSION_STATUS_COMPLETED:
		return core.StatusCompleted, true
	case savepointv1.SessionStatus_SESSION_STATUS_FAILED:
		return core.StatusFailed, true
	}
	return core.StatusAny, false
}

// validateComplete checks a CompleteSession request and returns it as a
// CompleteRequest. The final output is capped like state_json.
func validateComplete(lim Limits, req *savepointv1.CompleteSessionRequest) (*core.CompleteRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	requestID, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	st, _ := statusFromProto(req.GetStatus())
	if st != core.StatusCompleted && st != core.StatusFailed {
		return nil, fieldErr("status", reasonInvalidSessionStatus,
			"is %s; give SESSION_STATUS_COMPLETED or SESSION_STATUS_FAILED", req.GetStatus())
	}
	if n := len(req.GetFinalOutput()); n > lim.MaxStateBytes {
		return nil, fieldErr("final_output", reasonFieldTooLarge, "is %d bytes; at most %d are allowed (--max-state-bytes)", n, lim.MaxStateBytes)
	}
	return &core.CompleteRequest{
		SessionID: req.GetSessionId(), Epoch: req.GetEpoch(), Status: st,
		FinalOutput: req.GetFinalOutput(), RequestID: requestID,
	}, nil
}

func validateListEffects(req *savepointv1.ListEffectsRequest) error {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return err
	}
	return validatePageSize("page_size", req.GetPageSize())
}

// validateFork checks a ForkSession request.
func validateFork(req *savepointv1.ForkSessionRequest) (*core.ForkRequest, error) {
	if err := validateSessionID("source_session_id", req.GetSourceSessionId()); err != nil {
		return nil, err
	}
	if err := validateSessionID("new_session_id", req.GetNewSessionId()); err != nil {
		return nil, err
	}
	if req.GetNewSessionId() == req.GetSourceSessionId() {
		return nil, fieldErr("new_session_id", reasonInvalidSessionID, "names the source session; a fork needs a new id (RewindSession rewinds a session in place)")
	}
	requestID, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &core.ForkRequest{SourceID: req.GetSourceSessionId(), Revision: req.GetRevision(), NewID: req.GetNewSessionId(), RequestID: requestID}, nil
}

// validateRewind checks a RewindSession request.
func validateRewind(req *savepointv1.RewindSessionRequest) (*core.RewindRequest, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	requestID, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if req.GetRevision() == 0 {
		return nil, fieldErr("revision", reasonMissingField, "is required: give the kept revision to rewind to")
	}
	return &core.RewindRequest{SessionID: req.GetSessionId(), Epoch: req.GetEpoch(), Revision: req.GetRevision(), RequestID: requestID}, nil
}
