package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Domain is the google.rpc.ErrorInfo domain of every Savepoint error.
const Domain = "savepoint.v1"

// The sentinel errors of Savepoint. Every error a Client returns for a failed
// RPC is an *Error that unwraps to the sentinel of its ErrorInfo reason, so
// callers branch with errors.Is, never by reading message text:
//
//	if errors.Is(err, client.ErrSessionFenced) { /* another process resumed the session: stop */ }
var (
	// ErrSessionFenced (SESSION_FENCED): another process resumed the
	// session; this one no longer owns it and must stop.
	ErrSessionFenced = errors.New("savepoint: session fenced")
	// ErrRevisionMismatch (REVISION_MISMATCH): the session changed since the
	// revision this write built on.
	ErrRevisionMismatch = errors.New("savepoint: revision mismatch")
	// ErrSessionNotFound (SESSION_NOT_FOUND): no such session; nothing to
	// resume from.
	ErrSessionNotFound = errors.New("savepoint: session not found")
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
	// ErrCheckpointCorrupt (CHECKPOINT_CORRUPT): the session's stored data cannot be
	// decoded and can no longer be trusted; delete the session.
	ErrCheckpointCorrupt = errors.New("savepoint: checkpoint corrupt")
	// ErrDiskFull (DISK_FULL): the daemon could not write for lack of space.
	ErrDiskFull = errors.New("savepoint: disk full")
	// ErrPermissionDenied (PERMISSION_DENIED): the daemon does not allow this
	// process's uid or gid (its --allow-uid and --allow-gid).
	ErrPermissionDenied = errors.New("savepoint: permission denied")
	// ErrRequestTooLarge (REQUEST_TOO_LARGE): the whole request is over the
	// daemon's --max-request-bytes; ErrorInfo metadata "request_bytes" and
	// "max_request_bytes" give both sizes. Send less per call.
	ErrRequestTooLarge = errors.New("savepoint: request too large")
	// ErrInternal (INTERNAL): a daemon bug or an unexpected store failure.
	ErrInternal = errors.New("savepoint: internal error")
	// ErrInvalidArgument: any INVALID_ARGUMENT answer, such as
	// INVALID_SESSION_ID, INVALID_JSON, INVALID_UTF8,
	// KEEP_MESSAGES_OUT_OF_RANGE or INVALID_PAGE_TOKEN. The *Error's Reason
	// says which.
	ErrInvalidArgument = errors.New("savepoint: invalid argument")
	// ErrUnavailable: the daemon cannot be reached (gRPC UNAVAILABLE: down,
	// restarting, or its store is closed). Savepoint calls that are safe to
	// repeat were retried before this was returned.
	ErrUnavailable = errors.New("savepoint: daemon unavailable")
	// ErrUploadAborted (UPLOAD_ABORTED): a graph checkpoint upload was
	// aborted because its thread was deleted or copied over meanwhile;
	// nothing was stored.
	ErrUploadAborted = errors.New("savepoint: upload aborted")
	// ErrSessionCompleted (SESSION_COMPLETED): the session is completed or
	// failed; saves and BeginEffect need Reopen first, and completing it
	// with another status or final output is refused.
	ErrSessionCompleted = errors.New("savepoint: session completed")
	// ErrPlaintextBackup (PLAINTEXT_BACKUP): the daemon's store has no
	// encryption key, so its backup would be plaintext; ask for one with
	// plaintext set to accept that.
	ErrPlaintextBackup = errors.New("savepoint: plaintext backup refused")
	// ErrBackupUnsupported (BACKUP_UNSUPPORTED): the daemon's store cannot
	// stream a backup (PostgreSQL: use the database's own tools, pg_dump).
	ErrBackupUnsupported = errors.New("savepoint: backup not supported by the daemon's store")
	// ErrEffectInputMismatch (EFFECT_INPUT_MISMATCH): a graph thread's tool
	// use id was begun before with another tool name or input (some models
	// reuse ids such as "call_0"); nothing was written.
	ErrEffectInputMismatch = errors.New("savepoint: tool use begun with another name or input")
	// ErrEffectNotBegun (EFFECT_NOT_BEGUN): a graph thread's tool use was
	// never begun, or the attempt recorded is not the latest one begun.
	ErrEffectNotBegun = errors.New("savepoint: tool use attempt not begun")
	// ErrCallNotInDoubt (CALL_NOT_IN_DOUBT): ResolveEffect of a tool use
	// that is not in doubt (recorded, not pending, or one Reconcile runs);
	// nothing was written.
	ErrCallNotInDoubt = errors.New("savepoint: tool use not in doubt")
	// ErrResolutionConflict (RESOLUTION_CONFLICT): the tool use was
	// resolved already with another finding; the first resolution stands.
	ErrResolutionConflict = errors.New("savepoint: tool use resolved otherwise")
	// ErrApprovalNotWaiting (APPROVAL_NOT_WAITING): ApproveEffect of a tool
	// use that cannot take a decision (begun without one, recorded, or
	// neither waiting nor pending); nothing was written.
	ErrApprovalNotWaiting = errors.New("savepoint: tool use not waiting for approval")
	// ErrApprovalConflict (APPROVAL_CONFLICT): the tool use was decided
	// already otherwise; the first decision stands.
	ErrApprovalConflict = errors.New("savepoint: tool use decided otherwise")
	// ErrApprovalInputMismatch (APPROVAL_INPUT_MISMATCH): the approval's
	// input digest is not the call's; the approver saw other input.
	ErrApprovalInputMismatch = errors.New("savepoint: approval for other input")
	// ErrCommitOutcomeUnknown (COMMIT_OUTCOME_UNKNOWN, an UNAVAILABLE):
	// the daemon's connection to its database failed after COMMIT was sent,
	// so the write may or may not be stored. The same request again, with
	// its request id or tool use id, is answered from what was stored or
	// performed once; the client retries it so before returning this.
	// errors.Is matches ErrUnavailable too.
	ErrCommitOutcomeUnknown = fmt.Errorf("savepoint: commit outcome unknown: %w", ErrUnavailable)
	// ErrNoWritableHost (NO_WRITABLE_HOST, an UNAVAILABLE): no host of the
	// daemon's database accepts writes (a failover); nothing was written.
	// errors.Is matches ErrUnavailable too.
	ErrNoWritableHost = fmt.Errorf("savepoint: no writable database host: %w", ErrUnavailable)
)

// The sentinels' names before they took their reason's name, kept for one
// release. Each is the same error as its new name, so errors.Is matches
// either.
var (
	// ErrFenced is ErrSessionFenced.
	//
	// Deprecated: use ErrSessionFenced.
	ErrFenced = ErrSessionFenced
	// ErrNotFound is ErrSessionNotFound.
	//
	// Deprecated: use ErrSessionNotFound.
	ErrNotFound = ErrSessionNotFound
	// ErrCorrupt is ErrCheckpointCorrupt.
	//
	// Deprecated: use ErrCheckpointCorrupt.
	ErrCorrupt = ErrCheckpointCorrupt
)

// reasons maps every reason of the ErrorReason enum to its sentinel;
// TestEveryReasonHasASentinel fails when the enum gains a value this table
// lacks.
var reasons = map[savepointv1.ErrorReason]error{
	savepointv1.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND:          ErrSessionNotFound,
	savepointv1.ErrorReason_ERROR_REASON_SESSION_EXISTS:             ErrSessionExists,
	savepointv1.ErrorReason_ERROR_REASON_SESSION_FENCED:             ErrSessionFenced,
	savepointv1.ErrorReason_ERROR_REASON_REVISION_MISMATCH:          ErrRevisionMismatch,
	savepointv1.ErrorReason_ERROR_REASON_REVISION_NOT_FOUND:         ErrRevisionNotFound,
	savepointv1.ErrorReason_ERROR_REASON_REQUEST_ID_REUSED:          ErrRequestIDReused,
	savepointv1.ErrorReason_ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE: ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_CALL_ALREADY_RECORDED:      ErrCallAlreadyRecorded,
	savepointv1.ErrorReason_ERROR_REASON_CALL_NOT_PENDING:           ErrCallNotPending,
	savepointv1.ErrorReason_ERROR_REASON_CALL_UNKNOWN:               ErrCallUnknown,
	savepointv1.ErrorReason_ERROR_REASON_TOOL_NAME_MISMATCH:         ErrToolNameMismatch,
	savepointv1.ErrorReason_ERROR_REASON_EFFECT_CONFLICT:            ErrEffectConflict,
	savepointv1.ErrorReason_ERROR_REASON_CHECKPOINT_CORRUPT:         ErrCheckpointCorrupt,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_PAGE_TOKEN:         ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_UNAVAILABLE:                ErrUnavailable,
	savepointv1.ErrorReason_ERROR_REASON_INTERNAL:                   ErrInternal,
	savepointv1.ErrorReason_ERROR_REASON_DISK_FULL:                  ErrDiskFull,
	savepointv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED:          ErrPermissionDenied,
	savepointv1.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE:          ErrRequestTooLarge,
	savepointv1.ErrorReason_ERROR_REASON_CANCELED:                   context.Canceled,
	savepointv1.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED:          context.DeadlineExceeded,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT:           ErrInvalidArgument,
	// Field reasons: a bad request field; ErrorInfo metadata names it.
	savepointv1.ErrorReason_ERROR_REASON_INVALID_SESSION_ID:    ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_TOOL_USE_ID:   ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_REQUEST_ID:    ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_MISSING_FIELD:         ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_JSON:          ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_MESSAGE_TOO_LARGE:     ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_STATE_TOO_LARGE:       ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_EFFECT_CLASS:  ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_DUPLICATE_TOOL_USE_ID: ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_TOOL_USE_ID_MISMATCH:  ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_LABEL:         ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_PAGE_SIZE:     ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_FIELD_TOO_LARGE:       ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_UTF8:          ErrInvalidArgument,
	// GraphCheckpointService's own reasons.
	savepointv1.ErrorReason_ERROR_REASON_INVALID_GRAPH_KEY:     ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_UPLOAD:        ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_UPLOAD_ABORTED:        ErrUploadAborted,
	savepointv1.ErrorReason_ERROR_REASON_EFFECT_INPUT_MISMATCH: ErrEffectInputMismatch,
	savepointv1.ErrorReason_ERROR_REASON_EFFECT_NOT_BEGUN:      ErrEffectNotBegun,
	// A database failing over.
	savepointv1.ErrorReason_ERROR_REASON_COMMIT_OUTCOME_UNKNOWN: ErrCommitOutcomeUnknown,
	savepointv1.ErrorReason_ERROR_REASON_NO_WRITABLE_HOST:       ErrNoWritableHost,
	// Session status.
	savepointv1.ErrorReason_ERROR_REASON_SESSION_COMPLETED:      ErrSessionCompleted,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_SESSION_STATUS: ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_PLAINTEXT_BACKUP:       ErrPlaintextBackup,
	savepointv1.ErrorReason_ERROR_REASON_BACKUP_UNSUPPORTED:     ErrBackupUnsupported,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_ORDER_BY:       ErrInvalidArgument,
	// Resolving a tool use in doubt.
	savepointv1.ErrorReason_ERROR_REASON_CALL_NOT_IN_DOUBT:       ErrCallNotInDoubt,
	savepointv1.ErrorReason_ERROR_REASON_RESOLUTION_CONFLICT:     ErrResolutionConflict,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_RESOLUTION:      ErrInvalidArgument,
	savepointv1.ErrorReason_ERROR_REASON_APPROVAL_NOT_WAITING:    ErrApprovalNotWaiting,
	savepointv1.ErrorReason_ERROR_REASON_APPROVAL_CONFLICT:       ErrApprovalConflict,
	savepointv1.ErrorReason_ERROR_REASON_APPROVAL_INPUT_MISMATCH: ErrApprovalInputMismatch,
	savepointv1.ErrorReason_ERROR_REASON_INVALID_APPROVAL:        ErrInvalidArgument,
}

// Error is a failed Savepoint RPC. It unwraps to the sentinel of its reason
// (and to ErrInvalidArgument or ErrUnavailable by code, to context.Canceled
// or context.DeadlineExceeded when the call's context ended), so errors.Is
// works on it; errors.As gives the details:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Reason == "REVISION_MISMATCH" { ... e.CurrentRevision ... }
//
// status.Code and status.FromError still see the original gRPC status.
//
// One refusal comes from the client itself, with the shape the daemon gives
// it: a request holding a string field that is not valid UTF-8, which gRPC
// cannot encode, is INVALID_ARGUMENT with reason INVALID_UTF8 and metadata
// "field" naming the string, and was never sent.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the ErrorInfo reason, such as "SESSION_FENCED"; empty when the
	// status carried no ErrorInfo of the savepoint.v1 domain (a transport
	// error, or a request over four times the daemon's --max-request-bytes,
	// which gRPC itself rejects with RESOURCE_EXHAUSTED).
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
	unsent    bool // refused by the client: the daemon never saw the request
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
	if r, ok := reason.Parse(e.Reason); ok && reasons[r] != nil {
		e.sentinels = append(e.sentinels, reasons[r])
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

// unsent says whether err is a refusal of the client's own, for a request
// it never sent (see Error).
func unsent(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.unsent
}

func parseUint(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
