package rpc

import (
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc/codes"
)

// TestGraphReasons checks the graph API's reasons: each is listed by
// Reasons with its code, and its errors translate to it.
func TestGraphReasons(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{fmt.Errorf("commit: %w", core.ErrUploadAborted), codes.Aborted, "UPLOAD_ABORTED"},
		{fieldErr("thread_id", reasonInvalidGraphKey, "is empty"), codes.InvalidArgument, "INVALID_GRAPH_KEY"},
		{fieldErr("chunk", reasonInvalidUpload, "too many bytes"), codes.InvalidArgument, "INVALID_UPLOAD"},
	} {
		st := ToStatus(tc.err)
		if st.Code() != tc.code || errorInfo(t, st).Reason != tc.reason {
			t.Errorf("%v: %v %s, want %v %s", tc.err, st.Code(), errorInfo(t, st).Reason, tc.code, tc.reason)
		}
		if code, ok := Reasons()[tc.reason]; !ok || code != tc.code {
			t.Errorf("Reasons()[%s] = %v, %v", tc.reason, code, ok)
		}
	}
}
