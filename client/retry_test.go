package client

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// services are every service of the API, whose RPCs must each declare
// their retry safety.
var services = []protoreflect.ServiceDescriptor{
	savepointv1.File_savepoint_v1_savepoint_proto.Services().ByName("SavepointService"),
	savepointv1.File_savepoint_v1_graph_proto.Services().ByName("GraphCheckpointService"),
}

// TestEveryRPCDeclaresRetrySafety fails when an RPC is added without an
// idempotency_level option (IDEMPOTENCY_UNKNOWN, with or without
// retry_with_request_id, counts: it says "never" or "with a request id").
func TestEveryRPCDeclaresRetrySafety(t *testing.T) {
	n := 0
	for _, sd := range services {
		ms := sd.Methods()
		for i := range ms.Len() {
			m := ms.Get(i)
			n++
			o, _ := m.Options().(*descriptorpb.MethodOptions)
			if o == nil || o.IdempotencyLevel == nil {
				t.Errorf("%s declares no idempotency_level: add option idempotency_level (and retry_with_request_id if a request_id makes it safe) in its .proto", m.FullName())
			}
			if methodRetryRule(m) == retryWithRequestID && m.Input().Fields().ByName("request_id") == nil && !m.IsStreamingClient() {
				t.Errorf("%s is retry_with_request_id but %s has no request_id", m.FullName(), m.Input().FullName())
			}
		}
	}
	if n < 30 {
		t.Errorf("found only %d RPCs", n)
	}
}

// TestRetrySafe checks the table read from the descriptors: a read and an
// idempotent write always, a request-id write only with its id, and the rest
// never.
func TestRetrySafe(t *testing.T) {
	const svc = "/savepoint.v1.SavepointService/"
	tests := []struct {
		method string
		req    any
		want   bool
	}{
		{svc + "ListSessions", &savepointv1.ListSessionsRequest{}, true},
		{svc + "Resume", &savepointv1.ResumeRequest{}, true},
		{svc + "BeginEffect", &savepointv1.BeginEffectRequest{}, true},
		{svc + "SaveCheckpoint", &savepointv1.SaveCheckpointRequest{}, false},
		{svc + "SaveCheckpoint", &savepointv1.SaveCheckpointRequest{RequestId: "r"}, true},
		{svc + "ForkSession", &savepointv1.ForkSessionRequest{RequestId: "r"}, true},
		{svc + "CompleteSession", &savepointv1.CompleteSessionRequest{}, false},
		{svc + "DeleteSession", &savepointv1.DeleteSessionRequest{}, false},
		{svc + "Verify", &savepointv1.VerifyRequest{}, false},
		{svc + "NoSuchMethod", &savepointv1.VerifyRequest{}, false},
		{"/savepoint.v1.GraphCheckpointService/ListThreadEffects", &savepointv1.ListThreadEffectsRequest{}, true},
		{"/savepoint.v1.GraphCheckpointService/ResolveThreadEffect", &savepointv1.ResolveThreadEffectRequest{}, false},
		{"/savepoint.v1.GraphCheckpointService/ResolveThreadEffect", &savepointv1.ResolveThreadEffectRequest{RequestId: "r"}, true},
		{svc + "ResolveEffect", &savepointv1.ResolveEffectRequest{RequestId: "r"}, true},
	}
	for _, tt := range tests {
		if got := retrySafe(tt.method, tt.req); got != tt.want {
			t.Errorf("retrySafe(%s, %T) = %v, want %v", tt.method, tt.req, got, tt.want)
		}
	}
}

// requests returns m's request message, empty and with request_id set when
// it has one.
func requests(t *testing.T, m protoreflect.MethodDescriptor) []any {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	out := []any{mt.New().Interface()}
	if f := m.Input().Fields().ByName("request_id"); f != nil {
		r := mt.New()
		r.Set(f, protoreflect.ValueOfString("r1"))
		out = append(out, r.Interface())
	}
	return out
}
