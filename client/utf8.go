package client

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/internal/protoutf8"
	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// refuseInvalidUTF8 returns the error the daemon answers a request holding
// a string field that is not valid UTF-8 with (INVALID_ARGUMENT, reason
// INVALID_UTF8, metadata "field" naming the first such string, the daemon's
// message), or nil when m has none or is not a proto message. grpc-go cannot
// marshal such a request, so it would fail with a bare INTERNAL instead; the
// returned *Error is marked as never sent.
func refuseInvalidUTF8(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	r := pm.ProtoReflect()
	f := protoutf8.First(r.Descriptor(), r)
	if f == nil {
		return nil
	}
	st := status.New(codes.InvalidArgument, f.Field+": "+f.Msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason.String(savepointv1.ErrorReason_ERROR_REASON_INVALID_UTF8),
		Domain:   Domain,
		Metadata: map[string]string{"field": f.Field},
	}); err == nil {
		st = withInfo
	}
	e := translate(st.Err()).(*Error)
	e.unsent = true
	return e
}
