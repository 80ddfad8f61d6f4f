package client

import (
	"maps"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// retryRule is when a call that may have been applied can be sent again,
// as its RPC declares it in the proto (proto/savepoint/v1/options.proto).
type retryRule int

const (
	// retryNever: IDEMPOTENCY_UNKNOWN alone, such as DeleteSession.
	retryNever retryRule = iota
	// retryAlways: NO_SIDE_EFFECTS or IDEMPOTENT.
	retryAlways
	// retryWithRequestID: retry_with_request_id, when the request carries
	// a request_id.
	retryWithRequestID
)

// retryRules holds the rule of every method of both services by full
// method name, read once from the generated descriptors.
var retryRules = func() map[string]retryRule {
	rules := serviceRetryRules(savepointv1.File_savepoint_v1_savepoint_proto.Services().ByName("SavepointService"))
	maps.Copy(rules, serviceRetryRules(savepointv1.File_savepoint_v1_graph_proto.Services().ByName("GraphCheckpointService")))
	return rules
}()

// serviceRetryRules returns the rule of each of sd's methods by full
// method name ("/savepoint.v1.SavepointService/SaveCheckpoint").
func serviceRetryRules(sd protoreflect.ServiceDescriptor) map[string]retryRule {
	rules := map[string]retryRule{}
	ms := sd.Methods()
	for i := range ms.Len() {
		m := ms.Get(i)
		rules["/"+string(sd.FullName())+"/"+string(m.Name())] = methodRetryRule(m)
	}
	return rules
}

// methodRetryRule reads m's idempotency_level and retry_with_request_id.
func methodRetryRule(m protoreflect.MethodDescriptor) retryRule {
	o, _ := m.Options().(*descriptorpb.MethodOptions)
	if o == nil {
		return retryNever
	}
	switch o.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return retryAlways
	}
	if v, _ := proto.GetExtension(o, savepointv1.E_RetryWithRequestId).(bool); v {
		return retryWithRequestID
	}
	return retryNever
}

// retrySafe says whether repeating a call that may have been applied is
// harmless, as its RPC declares: a method the table lacks is not.
func retrySafe(method string, req any) bool {
	switch retryRules[method] {
	case retryAlways:
		return true
	case retryWithRequestID:
		r, ok := req.(interface{ GetRequestId() string })
		return ok && r.GetRequestId() != ""
	}
	return false
}
