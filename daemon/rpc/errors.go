package rpc

import (
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// fieldError is a bad request field. Field is its path, as in
// "append_messages[0].content_json"; Reason is its ErrorInfo reason, always
// one with code INVALID_ARGUMENT.
type fieldError struct {
	Field  string
	Reason savepointv1.ErrorReason
	Msg    string
}

func (e *fieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }
func (e *fieldError) Unwrap() error { return core.ErrInvalidArgument }

// ErrRequestTooLarge is a whole request over Config.MaxRequestBytes; see
// requestSizeError.
var ErrRequestTooLarge = errors.New("request too large")

// requestSizeError is a request of Size bytes refused for being over Limit,
// the configured MaxRequestBytes; Request is the refused message, which
// chooses the hint. It unwraps to ErrRequestTooLarge.
type requestSizeError struct {
	Size, Limit int
	Request     any
}

func (e *requestSizeError) Error() string {
	return fmt.Sprintf("%v: the request is %d bytes; at most %d are accepted (--max-request-bytes): %s",
		ErrRequestTooLarge, e.Size, e.Limit, sizeHint(e.Request))
}

// sizeHint says what to do about a request too large, for its kind of
// request.
func sizeHint(req any) string {
	switch req.(type) {
	case *savepointv1.PutCheckpointRequest:
		return "send a large checkpoint with UploadCheckpoint, which streams it in chunks"
	case *savepointv1.PutWritesRequest:
		return "send fewer writes per call"
	case *savepointv1.SaveCheckpointRequest:
		return "append fewer messages per save; a single message, state or tool input this large is over its own limit " +
			"(--max-message-bytes, --max-state-bytes) anyway, so keep such a value outside the session and save a reference to it"
	case *savepointv1.RecordEffectRequest, *savepointv1.CompleteSessionRequest:
		return "an output this large is over its own limit (--max-message-bytes, --max-state-bytes) anyway; " +
			"keep it outside the session and record a reference to it"
	default:
		return "send less per call"
	}
}

func (e *requestSizeError) Unwrap() error { return ErrRequestTooLarge }

// ErrPermissionDenied is a call whose caller the server does not admit
// (its peer credentials are unknown or not on the allow list).
var ErrPermissionDenied = errors.New("permission denied")
