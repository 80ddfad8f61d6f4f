package integration_test

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// The methods the refusal tests call, as grpc-go names them.
const (
	saveMethod    = "/savepoint.v1.SavepointService/SaveCheckpoint"
	resumeMethod  = "/savepoint.v1.SavepointService/Resume"
	verifyMethod  = "/savepoint.v1.SavepointService/Verify"
	healthCheck   = "/grpc.health.v1.Health/Check"
	healthWatch   = "/grpc.health.v1.Health/Watch"
	reflectMethod = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
)

// rawInvoke sends b as the request of a unary method and returns the error.
func rawInvoke(conn *grpc.ClientConn, method string, b []byte) error {
	return conn.Invoke(ctx, method, &daemontest.RawFrame{B: b}, &daemontest.RawFrame{}, grpc.ForceCodec(daemontest.RawCodec{}))
}

// rawStream sends b as the first request of a streaming method and returns
// the error the stream ends with.
func rawStream(conn *grpc.ClientConn, method string, b []byte) error {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(daemontest.RawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(&daemontest.RawFrame{B: b}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		if err := s.RecvMsg(&daemontest.RawFrame{}); err != nil {
			return err
		}
	}
}

// marshalBroken marshals m and replaces each utf8Hole in it, of which there
// must be one at least, with invalid UTF-8 of the same length.
func marshalBroken(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(utf8Hole)) {
		t.Fatalf("the request does not hold %q", utf8Hole)
	}
	bad := []byte(utf8Hole)
	bad[2], bad[3] = 0xff, 0xc0
	return bytes.ReplaceAll(b, []byte(utf8Hole), bad)
}

// padTo returns a copy of m that is n bytes on the wire, padded with an
// unknown field; n must leave room for the field's tag and length.
func padTo(m proto.Message, n int) proto.Message {
	m = proto.Clone(m)
	room := n - proto.Size(m) - protowire.SizeTag(1000)
	payload := room - protowire.SizeVarint(uint64(room))
	if protowire.SizeVarint(uint64(payload))+payload != room {
		payload++ // the length's varint is a byte shorter than room's
	}
	b := protowire.AppendTag(nil, 1000, protowire.BytesType)
	b = protowire.AppendBytes(b, bytes.Repeat([]byte{'p'}, payload))
	m.ProtoReflect().SetUnknown(append(m.ProtoReflect().GetUnknown(), b...))
	if got := proto.Size(m); got != n {
		panic(fmt.Sprintf("padTo(%d) made %d bytes", n, got))
	}
	return m
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRequestSize sends requests around MaxRequestBytes (1 MiB here) to
// unary and streaming methods: up to four times the limit they are refused
// by savepointd with REQUEST_TOO_LARGE and both sizes; beyond, grpc-go
// refuses them itself, with no ErrorInfo (docs/api.md says so). A refused
// save, which would succeed at the limit, changes nothing.
func TestRequestSize(t *testing.T) {
	const limit = 1 << 20
	d := daemontest.StartInProcess(t, daemon.Config{
		MaxRequestBytes: limit, MaxMessageBytes: 256 << 10, MaxStateBytes: 256 << 10, ResponseBudgetBytes: 512 << 10,
	})
	save := &savepointv1.SaveCheckpointRequest{SessionId: "s", AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"go"`}}}
	if _, err := d.Client.SaveCheckpoint(ctx, save); err != nil {
		t.Fatal(err)
	}
	next := &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 1, AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `"ok"`}}}
	before := takeSnapshot(t, d.Client, nil)

	tooLarge := func(n int) badCase {
		return badCase{code: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE",
			md: map[string]string{"request_bytes": fmt.Sprint(n), "max_request_bytes": fmt.Sprint(limit)}}
	}
	bare := badCase{code: codes.ResourceExhausted, noInfo: true}
	tests := []struct {
		name string
		size int
		want badCase
	}{
		{"one byte over", limit + 1, tooLarge(limit + 1)},
		{"3.9 times", limit * 39 / 10, tooLarge(limit * 39 / 10)},
		{"4 times", 4 * limit, tooLarge(4 * limit)},
		{"one byte over 4 times", 4*limit + 1, bare},
		{"5 times", 5 * limit, bare},
	}
	calls := []struct {
		name string
		call func(b []byte) error
		req  proto.Message
	}{
		{"SaveCheckpoint", func(b []byte) error { return rawInvoke(d.Conn, saveMethod, b) }, next},
		{"Verify", func(b []byte) error { return rawInvoke(d.Conn, verifyMethod, b) }, &savepointv1.VerifyRequest{}},
		{"Health.Check", func(b []byte) error { return rawInvoke(d.Conn, healthCheck, b) }, &healthpb.HealthCheckRequest{}},
		{"Health.Watch (server stream)", func(b []byte) error { return rawStream(d.Conn, healthWatch, b) }, &healthpb.HealthCheckRequest{}},
		{"ServerReflectionInfo (bidi stream)", func(b []byte) error { return rawStream(d.Conn, reflectMethod, b) },
			&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}},
	}
	for _, c := range calls {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				checkStatus(t, c.call(mustMarshal(t, padTo(c.req, tt.size))), tt.want)
				sameSnapshot(t, before, takeSnapshot(t, d.Client, nil))
			})
		}
	}

	// At the limit the save is served (and the daemon still serves after
	// the refusals).
	resp := &savepointv1.SaveCheckpointResponse{}
	if err := d.Conn.Invoke(ctx, saveMethod, padTo(next, limit), resp); err != nil || resp.Revision != 2 {
		t.Fatalf("a save of exactly MaxRequestBytes: %v, %v", resp, err)
	}
}

// TestRequestDecodeRefusals sends raw requests that fail to decode to unary
// and streaming methods of every service savepointd serves: invalid UTF-8
// gets INVALID_ARGUMENT with INVALID_UTF8 and the field's path, other bad
// wire data INVALID_ARGUMENT with INVALID_ARGUMENT; either way the handler
// never runs and the store is unchanged. (TestBadInput covers the invalid
// UTF-8 of every string field of SavepointService's requests.)
func TestRequestDecodeRefusals(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, d.Client, nil)
	utf8Err := func(field string) badCase {
		return badCase{code: codes.InvalidArgument, reason: "INVALID_UTF8", field: field}
	}
	malformed := badCase{code: codes.InvalidArgument, reason: "INVALID_ARGUMENT"}
	// A save of s that would succeed but for its fault.
	good := func() *savepointv1.SaveCheckpointRequest {
		return &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 1,
			AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"a"`}, {Role: "assistant", ContentJson: `"b"`}},
			Labels:         map[string]string{"team": "red"}}
	}
	goodBytes := mustMarshal(t, good())
	withUTF8 := func(edit func(r *savepointv1.SaveCheckpointRequest)) []byte {
		r := good()
		edit(r)
		return marshalBroken(t, r)
	}
	tests := []struct {
		name   string
		method string
		stream bool
		req    []byte
		want   badCase
	}{
		{"save: second message's content_json", saveMethod, false,
			withUTF8(func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[1].ContentJson = `"` + utf8Hole + `"` }),
			utf8Err("append_messages[1].content_json")},
		{"save: of two bad strings, the first declared, though sent last", saveMethod, false,
			append(marshalBroken(t, &savepointv1.SaveCheckpointRequest{StateJson: `"` + utf8Hole + `"`}),
				withUTF8(func(r *savepointv1.SaveCheckpointRequest) { r.AppendMessages[0].Role = utf8Hole })...),
			utf8Err("append_messages[0].role")},
		{"save: label value", saveMethod, false,
			withUTF8(func(r *savepointv1.SaveCheckpointRequest) { r.Labels["team"] = utf8Hole }), utf8Err("labels")},
		{"save: truncated", saveMethod, false, goodBytes[:len(goodBytes)-3], malformed},
		{"save: field number 0", saveMethod, false, append(bytes.Clone(goodBytes), 0x00, 0x01), malformed},
		{"save: length past the end", saveMethod, false, append(bytes.Clone(goodBytes), 0x2a, 0x7f, 'x'), malformed},
		{"save: bad varint", saveMethod, false, append(bytes.Clone(goodBytes), 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), malformed},
		{"save: session_id sent as a varint is an unknown field", saveMethod, false,
			protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7),
			badCase{code: codes.InvalidArgument, reason: "INVALID_SESSION_ID", field: "session_id"}},
		{"resume: session_id", resumeMethod, false,
			marshalBroken(t, &savepointv1.ResumeRequest{SessionId: "s" + utf8Hole}), utf8Err("session_id")},
		{"health check: service", healthCheck, false,
			marshalBroken(t, &healthpb.HealthCheckRequest{Service: utf8Hole}), utf8Err("service")},
		{"health watch (server stream): service", healthWatch, true,
			marshalBroken(t, &healthpb.HealthCheckRequest{Service: utf8Hole}), utf8Err("service")},
		{"health watch (server stream): malformed", healthWatch, true, []byte{0x0a, 0x05, 'a'}, malformed},
		{"reflection (bidi stream): oneof file_by_filename", reflectMethod, true,
			marshalBroken(t, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: utf8Hole}}),
			utf8Err("file_by_filename")},
		{"reflection (bidi stream): nested extension request", reflectMethod, true,
			marshalBroken(t, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingExtension{
				FileContainingExtension: &rpb.ExtensionRequest{ContainingType: utf8Hole, ExtensionNumber: 1}}}),
			utf8Err("file_containing_extension.containing_type")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.stream {
				err = rawStream(d.Conn, tt.method, tt.req)
			} else {
				err = rawInvoke(d.Conn, tt.method, tt.req)
			}
			checkStatus(t, err, tt.want)
			sameSnapshot(t, before, takeSnapshot(t, d.Client, nil))
		})
	}
	// Control: the save the cases break is served.
	if err := rawInvoke(d.Conn, saveMethod, goodBytes); err != nil {
		t.Fatalf("the unbroken save fails: %v", err)
	}
}
