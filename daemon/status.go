package daemon

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every error the service
// returns.
const ErrorDomain = "savepoint.v1"

// ReasonInternal is the reason of an error the daemon did not expect; its
// text is logged, never returned.
const ReasonInternal = "INTERNAL"

// errorKind maps one error to its gRPC code, ErrorInfo reason and a hint
// telling the client what to do next.
type errorKind struct {
	err    error
	code   codes.Code
	reason string
	hint   string
}

// errorKinds is the one translation table, checked in order with errors.Is.
var errorKinds = []errorKind{
	{ErrSessionNotFound, codes.NotFound, "SESSION_NOT_FOUND",
		"nothing to resume from; create the session with expected_revision 0"},
	{ErrSessionExists, codes.AlreadyExists, "SESSION_EXISTS",
		"Resume the session to continue it, or choose another session_id"},
	{ErrSessionFenced, codes.Aborted, "SESSION_FENCED",
		"another process has resumed this session; stop writing to it, and Resume only to take it over"},
	{ErrRevisionMismatch, codes.Aborted, "REVISION_MISMATCH",
		"the session changed since your last save; Resume to load the current revision"},
	{ErrRevisionNotFound, codes.NotFound, "REVISION_NOT_FOUND",
		"that revision is not kept; leave revision unset to read the latest"},
	{ErrRequestIDReused, codes.InvalidArgument, "REQUEST_ID_REUSED",
		"this request_id was used for a different save; use a new request_id for each save"},
	{ErrKeepOutOfRange, codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE",
		"keep_messages must not exceed the stored message count; leave it unset to keep all"},
	{ErrCallAlreadyRecorded, codes.FailedPrecondition, "CALL_ALREADY_RECORDED",
		"the tool use's effect is recorded; append its result instead of leaving it pending"},
	{ErrCallNotPending, codes.FailedPrecondition, "CALL_NOT_PENDING",
		"save the tool use as pending in the latest revision before beginning it"},
	{ErrCallUnknown, codes.NotFound, "CALL_UNKNOWN",
		"only a tool use saved as pending can be recorded; check the tool_use_id"},
	{ErrToolNameMismatch, codes.FailedPrecondition, "TOOL_NAME_MISMATCH",
		"send the pending tool use's name, or leave name empty"},
	{ErrEffectConflict, codes.AlreadyExists, "EFFECT_CONFLICT",
		"a different outcome is recorded for this tool use and stays; read it with Reconcile"},
	{ErrCorrupt, codes.DataLoss, "CHECKPOINT_CORRUPT",
		"this session's stored data can no longer be trusted; delete it with DeleteSession and start it again"},
	{ErrInvalidPageToken, codes.InvalidArgument, "INVALID_PAGE_TOKEN",
		"pass next_page_token back unchanged with the same session, revision and filter, or start again with an empty page_token"},
	{ErrDiskFull, codes.ResourceExhausted, "DISK_FULL",
		"the daemon's disk is nearly full; reads still work, and writes resume once space is freed"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE",
		"the daemon cannot serve this now; retry with backoff"},
	{context.Canceled, codes.Canceled, "CANCELED",
		"the request was canceled"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED",
		"retry with a longer deadline"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT",
		"fix the request"},
}

// fieldReasons are the reasons a *FieldError from validation carries; all
// are INVALID_ARGUMENT.
var fieldReasons = []string{
	reasonInvalidSessionID,
	reasonInvalidToolUseID,
	reasonInvalidRequestID,
	reasonMissingField,
	reasonInvalidJSON,
	reasonMessageTooLarge,
	reasonStateTooLarge,
	reasonInvalidEffectClass,
	reasonDuplicateToolUseID,
	reasonInvalidLabel,
	reasonInvalidPageSize,
	reasonFieldTooLarge,
}

// Reasons returns every ErrorInfo reason the service can return, with the
// gRPC code it comes with.
func Reasons() map[string]codes.Code {
	m := map[string]codes.Code{ReasonInternal: codes.Internal}
	for _, k := range errorKinds {
		m[k.reason] = k.code
	}
	for _, r := range fieldReasons {
		m[r] = codes.InvalidArgument
	}
	return m
}

// ToStatus translates an error from validation or a Store into the status
// the service returns, with an ErrorInfo in domain ErrorDomain. A
// *FieldError adds metadata "field"; a *StateError adds "current_revision"
// and "current_epoch". An error matching nothing known is INTERNAL with a
// generic message, so its text never reaches the client: log it.
func ToStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var (
		code   = codes.Internal
		reason = ReasonInternal
		msg    = "internal error; see the daemon's log"
		md     = map[string]string{}
	)
	var fe *FieldError
	if errors.As(err, &fe) {
		code, reason, msg = codes.InvalidArgument, fe.Reason, fe.Error()
		md["field"] = fe.Field
	} else {
		for _, k := range errorKinds {
			if errors.Is(err, k.err) {
				code, reason, msg = k.code, k.reason, err.Error()+"; "+k.hint
				break
			}
		}
	}
	var se *StateError
	if errors.As(err, &se) {
		md["current_revision"] = strconv.FormatUint(se.CurrentRevision, 10)
		md["current_epoch"] = strconv.FormatUint(se.CurrentEpoch, 10)
	}
	if len(md) == 0 {
		md = nil
	}
	st := status.New(code, msg)
	withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason,
		Domain:   ErrorDomain,
		Metadata: md,
	})
	if derr != nil {
		return st
	}
	return withInfo
}
