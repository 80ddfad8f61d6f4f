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

// errorKind maps one error to its gRPC code and ErrorInfo reason. The
// error's own text, written where it arose, says what to do next.
type errorKind struct {
	err    error
	code   codes.Code
	reason string
}

// errorKinds is the one translation table, checked in order with errors.Is.
var errorKinds = []errorKind{
	{ErrSessionNotFound, codes.NotFound, "SESSION_NOT_FOUND"},
	{ErrSessionExists, codes.AlreadyExists, "SESSION_EXISTS"},
	{ErrSessionFenced, codes.Aborted, "SESSION_FENCED"},
	{ErrRevisionMismatch, codes.Aborted, "REVISION_MISMATCH"},
	{ErrRevisionNotFound, codes.NotFound, "REVISION_NOT_FOUND"},
	{ErrRequestIDReused, codes.InvalidArgument, "REQUEST_ID_REUSED"},
	{ErrKeepOutOfRange, codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE"},
	{ErrCallAlreadyRecorded, codes.FailedPrecondition, "CALL_ALREADY_RECORDED"},
	{ErrCallNotPending, codes.FailedPrecondition, "CALL_NOT_PENDING"},
	{ErrCallUnknown, codes.NotFound, "CALL_UNKNOWN"},
	{ErrToolNameMismatch, codes.FailedPrecondition, "TOOL_NAME_MISMATCH"},
	{ErrEffectConflict, codes.AlreadyExists, "EFFECT_CONFLICT"},
	{ErrCorrupt, codes.DataLoss, "CHECKPOINT_CORRUPT"},
	{ErrInvalidPageToken, codes.InvalidArgument, "INVALID_PAGE_TOKEN"},
	{ErrDiskFull, codes.ResourceExhausted, "DISK_FULL"},
	{ErrUploadAborted, codes.Aborted, "UPLOAD_ABORTED"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{context.Canceled, codes.Canceled, "CANCELED"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
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
	reasonInvalidGraphKey,
	reasonInvalidUpload,
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
				code, reason, msg = k.code, k.reason, err.Error()
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
