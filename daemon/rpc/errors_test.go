package rpc

import (
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestRequestSizeHints checks that REQUEST_TOO_LARGE says what fits the
// request refused: a save is told about the per-value limits too, since one
// message too large cannot be fixed by sending fewer.
func TestRequestSizeHints(t *testing.T) {
	for _, tt := range []struct {
		req  any
		want string
	}{
		{&savepointv1.SaveCheckpointRequest{}, "keep such a value outside the session"},
		{&savepointv1.RecordEffectRequest{}, "record a reference to it"},
		{&savepointv1.CompleteSessionRequest{}, "record a reference to it"},
		{&savepointv1.PutCheckpointRequest{}, "UploadCheckpoint"},
		{&savepointv1.PutWritesRequest{}, "fewer writes per call"},
		{&savepointv1.ListSessionsRequest{}, "send less per call"},
	} {
		msg := (&requestSizeError{Size: 5 << 20, Limit: 4 << 20, Request: tt.req}).Error()
		if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "5242880") || !strings.Contains(msg, "--max-request-bytes") {
			t.Errorf("%T: %q, want the sizes and %q", tt.req, msg, tt.want)
		}
	}
}
