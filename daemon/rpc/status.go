package rpc

import (
	"context"
	"errors"
	"strconv"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every error the service
// returns.
const ErrorDomain = "savepoint.v1"

// ReasonInternal is the reason of an error the daemon did not expect; its
// text is logged, never returned.
var ReasonInternal = reason.String(savepointv1.ErrorReason_ERROR_REASON_INTERNAL)

// errorKind gives one ErrorInfo reason its gRPC code and, when a sentinel
// error stands for it, that error. The error's own text, written where it
// arose, says what to do next.
type errorKind struct {
	err    error // nil: reached through a *fieldError, or the fallback INTERNAL
	code   codes.Code
	reason savepointv1.ErrorReason
}

// errorKinds is the one translation table: every reason of the ErrorReason
// enum has one row, and the rows with an error are checked in order with
// errors.Is.
var errorKinds = []errorKind{
	{nil, codes.Internal, savepointv1.ErrorReason_ERROR_REASON_INTERNAL},
	{core.ErrSessionNotFound, codes.NotFound, savepointv1.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND},
	{core.ErrSessionExists, codes.AlreadyExists, savepointv1.ErrorReason_ERROR_REASON_SESSION_EXISTS},
	{core.ErrSessionFenced, codes.Aborted, savepointv1.ErrorReason_ERROR_REASON_SESSION_FENCED},
	{core.ErrRevisionMismatch, codes.Aborted, savepointv1.ErrorReason_ERROR_REASON_REVISION_MISMATCH},
	{core.ErrRevisionNotFound, codes.NotFound, savepointv1.ErrorReason_ERROR_REASON_REVISION_NOT_FOUND},
	{core.ErrRequestIDReused, codes.InvalidArgument, savepointv1.ErrorReason_ERROR_REASON_REQUEST_ID_REUSED},
	{core.ErrKeepMessagesOutOfRange, codes.InvalidArgument, savepointv1.ErrorReason_ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE},
	{core.ErrCallAlreadyRecorded, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_CALL_ALREADY_RECORDED},
	{core.ErrCallNotPending, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_CALL_NOT_PENDING},
	{core.ErrCallUnknown, codes.NotFound, savepointv1.ErrorReason_ERROR_REASON_CALL_UNKNOWN},
	{core.ErrToolNameMismatch, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_TOOL_NAME_MISMATCH},
	{core.ErrEffectConflict, codes.AlreadyExists, savepointv1.ErrorReason_ERROR_REASON_EFFECT_CONFLICT},
	{core.ErrCheckpointCorrupt, codes.DataLoss, savepointv1.ErrorReason_ERROR_REASON_CHECKPOINT_CORRUPT},
	{core.ErrInvalidPageToken, codes.InvalidArgument, savepointv1.ErrorReason_ERROR_REASON_INVALID_PAGE_TOKEN},
	{core.ErrDiskFull, codes.ResourceExhausted, savepointv1.ErrorReason_ERROR_REASON_DISK_FULL},
	{core.ErrSessionCompleted, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_SESSION_COMPLETED},
	{core.ErrPlaintextBackup, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_PLAINTEXT_BACKUP},
	{core.ErrBackupUnsupported, codes.Unimplemented, savepointv1.ErrorReason_ERROR_REASON_BACKUP_UNSUPPORTED},
	{core.ErrUploadAborted, codes.Aborted, savepointv1.ErrorReason_ERROR_REASON_UPLOAD_ABORTED},
	{core.ErrEffectInputMismatch, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_EFFECT_INPUT_MISMATCH},
	{core.ErrEffectNotBegun, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_EFFECT_NOT_BEGUN},
	{core.ErrCallNotInDoubt, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_CALL_NOT_IN_DOUBT},
	{core.ErrResolutionConflict, codes.AlreadyExists, savepointv1.ErrorReason_ERROR_REASON_RESOLUTION_CONFLICT},
	{core.ErrApprovalNotWaiting, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_APPROVAL_NOT_WAITING},
	{core.ErrApprovalConflict, codes.AlreadyExists, savepointv1.ErrorReason_ERROR_REASON_APPROVAL_CONFLICT},
	{core.ErrApprovalInputMismatch, codes.FailedPrecondition, savepointv1.ErrorReason_ERROR_REASON_APPROVAL_INPUT_MISMATCH},
	{ErrPermissionDenied, codes.PermissionDenied, savepointv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED},
	{ErrRequestTooLarge, codes.ResourceExhausted, savepointv1.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE},
	{core.ErrCommitOutcomeUnknown, codes.Unavailable, savepointv1.ErrorReason_ERROR_REASON_COMMIT_OUTCOME_UNKNOWN},
	{core.ErrNoWritableHost, codes.Unavailable, savepointv1.ErrorReason_ERROR_REASON_NO_WRITABLE_HOST},
	{core.ErrUnavailable, codes.Unavailable, savepointv1.ErrorReason_ERROR_REASON_UNAVAILABLE},
	{context.Canceled, codes.Canceled, savepointv1.ErrorReason_ERROR_REASON_CANCELED},
	{context.DeadlineExceeded, codes.DeadlineExceeded, savepointv1.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED},
	{core.ErrInvalidArgument, codes.InvalidArgument, savepointv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
	// The reasons of a *fieldError (validation and the request codec).
	{nil, codes.InvalidArgument, reasonInvalidSessionID},
	{nil, codes.InvalidArgument, reasonInvalidToolUseID},
	{nil, codes.InvalidArgument, reasonInvalidRequestID},
	{nil, codes.InvalidArgument, reasonMissingField},
	{nil, codes.InvalidArgument, reasonInvalidJSON},
	{nil, codes.InvalidArgument, reasonMessageTooLarge},
	{nil, codes.InvalidArgument, reasonStateTooLarge},
	{nil, codes.InvalidArgument, reasonInvalidEffectClass},
	{nil, codes.InvalidArgument, reasonDuplicateToolUseID},
	{nil, codes.InvalidArgument, reasonToolUseIDMismatch},
	{nil, codes.InvalidArgument, reasonInvalidLabel},
	{nil, codes.InvalidArgument, reasonInvalidPageSize},
	{nil, codes.InvalidArgument, reasonFieldTooLarge},
	{nil, codes.InvalidArgument, reasonInvalidUTF8},
	{nil, codes.InvalidArgument, reasonInvalidGraphKey},
	{nil, codes.InvalidArgument, reasonInvalidUpload},
	{nil, codes.InvalidArgument, reasonInvalidSessionStatus},
	{nil, codes.InvalidArgument, reasonInvalidOrderBy},
	{nil, codes.InvalidArgument, reasonInvalidResolution},
	{nil, codes.InvalidArgument, reasonInvalidApproval},
}

// Reasons returns every ErrorInfo reason the service can return, as it goes
// on the wire, with the gRPC code it comes with.
func Reasons() map[string]codes.Code {
	m := make(map[string]codes.Code, len(errorKinds))
	for _, k := range errorKinds {
		m[reason.String(k.reason)] = k.code
	}
	return m
}

// ToStatus translates an error from validation or a Store into the status
// the service returns, with an ErrorInfo in domain ErrorDomain. A
// *fieldError or a *core.FieldMismatchError adds metadata "field"; a *StateError adds "current_revision"
// and "current_epoch"; a *requestSizeError adds "request_bytes" and
// "max_request_bytes". An error matching nothing known is INTERNAL with a
// generic message, so its text never reaches the client: log it.
func ToStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var (
		kind = errorKinds[0] // INTERNAL
		msg  = "internal error; see the daemon's log"
		md   = map[string]string{}
	)
	if fe, ok := errors.AsType[*fieldError](err); ok {
		kind, msg = errorKind{code: codes.InvalidArgument, reason: fe.Reason}, fe.Error()
		md["field"] = fe.Field
	} else {
		for _, k := range errorKinds {
			if k.err != nil && errors.Is(err, k.err) {
				kind, msg = k, err.Error()
				break
			}
		}
	}
	if me, ok := errors.AsType[*core.FieldMismatchError](err); ok {
		md["field"] = me.Field
	}
	if se, ok := errors.AsType[*core.StateError](err); ok {
		md["current_revision"] = strconv.FormatUint(se.CurrentRevision, 10)
		md["current_epoch"] = strconv.FormatUint(se.CurrentEpoch, 10)
	}
	if re, ok := errors.AsType[*requestSizeError](err); ok {
		md["request_bytes"] = strconv.Itoa(re.Size)
		md["max_request_bytes"] = strconv.Itoa(re.Limit)
	}
	if len(md) == 0 {
		md = nil
	}
	st := status.New(kind.code, msg)
	withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason.String(kind.reason),
		Domain:   ErrorDomain,
		Metadata: md,
	})
	if derr != nil {
		return st
	}
	return withInfo
}
