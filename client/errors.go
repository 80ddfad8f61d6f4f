package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the google.rpc.ErrorInfo domain of every Savepoint error.
const Domain = "savepoint.v1"

// The sentinel errors of Savepoint. Every error a Client returns for a failed
// RPC is an *Error that unwraps to the sentinel of its ErrorInfo reason, so
// callers branch with errors.Is, never by reading message text:
//
//	if errors.Is(err, client.ErrFenced) { /* another process resumed the session: stop */ }
var (
	// ErrFenced (SESSION_FENCED): another process resumed the session; this
	// one no longer owns it and must stop.
	ErrFenced = errors.New("savepoint: session fenced")
	// ErrRevisionMismatch (REVISION_MISMATCH): the session changed since the
	// revision this write built on.
	ErrRevisionMismatch = errors.New("savepoint: revision mismatch")
	// ErrNotFound (SESSION_NOT_FOUND): no such session; nothing to resume from.
	ErrNotFound = errors.New("savepoint: session not found")
	// ErrSessionExists (SESSION_EXISTS): a session with this id exists already.
	ErrSessionExists = errors.New("savepoint: session already exists")
	// ErrRevisionNotFound (REVISION_NOT_FOUND): the revision is not kept.
	ErrRevisionNotFound = errors.New("savepoint: revision not found")
	// ErrRequestIDReused (REQUEST_ID_REUSED): a request id was sent again with
	// a different payload. It also matches ErrInvalidArgument.
	ErrRequestIDReused = errors.New("savepoint: request id reused with a different payload")
	// ErrCallAlreadyRecorded (CALL_ALREADY_RECORDED): a tool use set pending
	// already has a ledger entry.
	ErrCallAlreadyRecorded = errors.New("savepoint: tool use already recorded")
	// ErrCallNotPending (CALL_NOT_PENDING): the tool use is not pending in the
	// latest revision.
	ErrCallNotPending = errors.New("savepoint: tool use not pending")
	// ErrCallUnknown (CALL_UNKNOWN): the tool use was never pending in the
	// session.
	ErrCallUnknown = errors.New("savepoint: tool use unknown")
	// ErrToolNameMismatch (TOOL_NAME_MISMATCH): the recorded name differs from
	// the pending tool use's name.
	ErrToolNameMismatch = errors.New("savepoint: tool name mismatch")
	// ErrEffectConflict (EFFECT_CONFLICT): a different outcome is recorded for
	// the tool use already; the first record wins.
	ErrEffectConflict = errors.New("savepoint: effect conflict")
	// ErrCorrupt (CHECKPOINT_CORRUPT): the session's stored data cannot be
	// decoded and can no longer be trusted; delete the session.
	ErrCorrupt = errors.New("savepoint: checkpoint corrupt")
	// ErrDiskFull (DISK_FULL): the daemon could not write for lack of space.
	ErrDiskFull = errors.New("savepoint: disk full")
	// ErrInternal (INTERNAL): a daemon bug or an unexpected store failure.
	ErrInternal = errors.New("savepoint: internal error")
	// ErrInvalidArgument: any INVALID_ARGUMENT answer, such as
	// INVALID_SESSION_ID, INVALID_JSON, KEEP_MESSAGES_OUT_OF_RANGE or
	// INVALID_PAGE_TOKEN. The *Error's Reason says which.
	ErrInvalidArgument = errors.New("savepoint: invalid argument")
	// ErrUnavailable: the daemon cannot be reached (gRPC UNAVAILABLE: down,
	// restarting, or its store is closed). Savepoint calls that are safe to
	// repeat were retried before this was returned.
	ErrUnavailable = errors.New("savepoint: daemon unavailable")
	// ErrUploadAborted (UPLOAD_ABORTED): a graph checkpoint upload was
	// aborted because its thread was deleted or copied over meanwhile;
	// nothing was stored.
	ErrUploadAborted = errors.New("savepoint: upload aborted")
)

// reasons maps every ErrorInfo reason the client knows to its sentinel. The
// daemon's table in docs/api.md lists the same reasons; Reasons exports these
// keys so a daemon test can check that both sides agree.
var reasons = map[string]error{
	"SESSION_NOT_FOUND":          ErrNotFound,
	"SESSION_EXISTS":             ErrSessionExists,
	"SESSION_FENCED":             ErrFenced,
	"REVISION_MISMATCH":          ErrRevisionMismatch,
	"REVISION_NOT_FOUND":         ErrRevisionNotFound,
	"REQUEST_ID_REUSED":          ErrRequestIDReused,
	"KEEP_MESSAGES_OUT_OF_RANGE": ErrInvalidArgument,
	"CALL_ALREADY_RECORDED":      ErrCallAlreadyRecorded,
	"CALL_NOT_PENDING":           ErrCallNotPending,
	"CALL_UNKNOWN":               ErrCallUnknown,
	"TOOL_NAME_MISMATCH":         ErrToolNameMismatch,
	"EFFECT_CONFLICT":            ErrEffectConflict,
	"CHECKPOINT_CORRUPT":         ErrCorrupt,
	"INVALID_PAGE_TOKEN":         ErrInvalidArgument,
	"UNAVAILABLE":                ErrUnavailable,
	"INTERNAL":                   ErrInternal,
	"DISK_FULL":                  ErrDiskFull,
	"CANCELED":                   context.Canceled,
	"DEADLINE_EXCEEDED":          context.DeadlineExceeded,
	"INVALID_ARGUMENT":           ErrInvalidArgument,
	// Field reasons: a bad request field; ErrorInfo metadata names it.
	"INVALID_SESSION_ID":    ErrInvalidArgument,
	"INVALID_TOOL_USE_ID":   ErrInvalidArgument,
	"INVALID_REQUEST_ID":    ErrInvalidArgument,
	"MISSING_FIELD":         ErrInvalidArgument,
	"INVALID_JSON":          ErrInvalidArgument,
	"MESSAGE_TOO_LARGE":     ErrInvalidArgument,
	"STATE_TOO_LARGE":       ErrInvalidArgument,
	"INVALID_EFFECT_CLASS":  ErrInvalidArgument,
	"DUPLICATE_TOOL_USE_ID": ErrInvalidArgument,
	"INVALID_LABEL":         ErrInvalidArgument,
	"INVALID_PAGE_SIZE":     ErrInvalidArgument,
	"FIELD_TOO_LARGE":       ErrInvalidArgument,
	// GraphCheckpointService's own reasons.
	"INVALID_GRAPH_KEY": ErrInvalidArgument,
	"INVALID_UPLOAD":    ErrInvalidArgument,
	"UPLOAD_ABORTED":    ErrUploadAborted,
}

// Reasons returns every ErrorInfo reason the client maps to a sentinel error,
// sorted.
func Reasons() []string { return slices.Sorted(maps.Keys(reasons)) }

// Error is a failed Savepoint RPC. It unwraps to the sentinel of its reason
// (and to ErrInvalidArgument or ErrUnavailable by code, to context.Canceled
// or context.DeadlineExceeded when the call's context ended), so errors.Is
// works on it; errors.As gives the details:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Reason == "REVISION_MISMATCH" { ... e.CurrentRevision ... }
//
// status.Code and status.FromError still see the original gRPC status.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the ErrorInfo reason, such as "SESSION_FENCED"; empty when the
	// status carried no ErrorInfo of the savepoint.v1 domain (a transport
	// error, or an oversize request rejected by gRPC itself).
	Reason string
	// Message is the status message, meant for people.
	Message string
	// Metadata is the ErrorInfo metadata, such as "current_revision".
	Metadata map[string]string
	// CurrentRevision and CurrentEpoch are the session's, parsed from the
	// metadata when the daemon sent them (conflicts and fencing), else 0.
	CurrentRevision uint64
	CurrentEpoch    uint64

	status    *status.Status
	sentinels []error
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("savepoint: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("savepoint: %s (%s): %s", e.Reason, e.Code, e.Message)
}

// Unwrap returns the sentinel errors e matches.
func (e *Error) Unwrap() []error { return e.sentinels }

// GRPCStatus returns the original status, for status.FromError and
// status.Code.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// translate turns a gRPC error into an *Error. It is the one place where
// statuses become client errors: the Client's interceptor calls it for every
// RPC, raw ones included. Errors that are not gRPC statuses pass unchanged.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			e.Reason = info.GetReason()
			e.Metadata = info.GetMetadata()
			break
		}
	}
	e.CurrentRevision = parseUint(e.Metadata["current_revision"])
	e.CurrentEpoch = parseUint(e.Metadata["current_epoch"])
	if s, ok := reasons[e.Reason]; ok {
		e.sentinels = append(e.sentinels, s)
	}
	var byCode error
	switch e.Code {
	case codes.InvalidArgument:
		byCode = ErrInvalidArgument
	case codes.Unavailable:
		byCode = ErrUnavailable
	case codes.Canceled:
		byCode = context.Canceled
	case codes.DeadlineExceeded:
		byCode = context.DeadlineExceeded
	}
	if byCode != nil && !slices.Contains(e.sentinels, byCode) {
		e.sentinels = append(e.sentinels, byCode)
	}
	return e
}

func parseUint(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
