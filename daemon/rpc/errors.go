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
// the configured MaxRequestBytes. It unwraps to ErrRequestTooLarge.
type requestSizeError struct {
	Size, Limit int
}

func (e *requestSizeError) Error() string {
	return fmt.Sprintf("%v: the request is %d bytes; at most %d are accepted (--max-request-bytes): send less per call, such as fewer messages per save",
		ErrRequestTooLarge, e.Size, e.Limit)
}

func (e *requestSizeError) Unwrap() error { return ErrRequestTooLarge }

// ErrPermissionDenied is a call whose caller the server does not admit
// (its peer credentials are unknown or not on the allow list).
var ErrPermissionDenied = errors.New("permission denied")
