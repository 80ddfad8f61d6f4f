package daemon

import (
	"errors"
	"fmt"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The errors every Store and the service return, wrapped with detail. Each
// maps to one gRPC code and ErrorInfo reason (see docs/api.md).
var (
	ErrInvalidArgument     = errors.New("invalid argument")
	ErrSessionNotFound     = errors.New("session not found")
	ErrSessionExists       = errors.New("session already exists")
	ErrSessionFenced       = errors.New("session fenced")
	ErrRevisionMismatch    = errors.New("revision mismatch")
	ErrRevisionNotFound    = errors.New("revision not found")
	ErrRequestIDReused     = errors.New("request id reused")
	ErrKeepOutOfRange      = errors.New("keep_messages beyond the history")
	ErrCallAlreadyRecorded = errors.New("tool use already recorded")
	ErrCallNotPending      = errors.New("tool use not pending")
	ErrCallUnknown         = errors.New("tool use unknown")
	ErrToolNameMismatch    = errors.New("tool name mismatch")
	ErrEffectConflict      = errors.New("effect conflict")
	ErrCorrupt             = errors.New("checkpoint corrupt")
	ErrInvalidPageToken    = errors.New("invalid page token")
	ErrUnavailable         = errors.New("store unavailable")
	ErrSessionCompleted    = errors.New("session completed")
	ErrPlaintextBackup     = errors.New("plaintext backup refused")
	ErrBackupUnsupported   = errors.New("backup not supported by this store")
)

// StateError is a conflict with the session's current state; it carries the
// revision and epoch the client should know to recover.
type StateError struct {
	Err             error // one of the sentinel errors above
	Msg             string
	CurrentRevision uint64
	CurrentEpoch    uint64
}

func (e *StateError) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.Msg) }
func (e *StateError) Unwrap() error { return e.Err }

// FieldError is a bad request field. Field is its path, as in
// "append_messages[0].content_json"; Reason is its ErrorInfo reason, always
// one with code INVALID_ARGUMENT.
type FieldError struct {
	Field  string
	Reason savepointv1.ErrorReason
	Msg    string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }
func (e *FieldError) Unwrap() error { return ErrInvalidArgument }

// ErrDiskFull is returned for writes while the data directory's filesystem
// is below its free-space reserve; reads keep working and writes resume by
// themselves once space is freed.
var ErrDiskFull = errors.New("disk full")

// ErrRequestTooLarge is a whole request over Config.MaxRequestBytes; see
// RequestSizeError.
var ErrRequestTooLarge = errors.New("request too large")

// RequestSizeError is a request of Size bytes refused for being over Limit,
// the configured MaxRequestBytes. It unwraps to ErrRequestTooLarge.
type RequestSizeError struct {
	Size, Limit int
}

func (e *RequestSizeError) Error() string {
	return fmt.Sprintf("%v: the request is %d bytes; at most %d are accepted (--max-request-bytes): send less per call, such as fewer messages per save",
		ErrRequestTooLarge, e.Size, e.Limit)
}

func (e *RequestSizeError) Unwrap() error { return ErrRequestTooLarge }
