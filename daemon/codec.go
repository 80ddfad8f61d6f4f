package daemon

import (
	"context"
	"fmt"
	"math"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec requestCodec builds on
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// transportLimitFactor is how many times Config.MaxRequestBytes the gRPC
// transport reads before refusing a request itself. Up to that size the
// service refuses an over-size request with REQUEST_TOO_LARGE and its sizes;
// above it grpc-go answers a bare RESOURCE_EXHAUSTED before any code of
// savepointd runs.
const transportLimitFactor = 4

// requestCodec is the server's codec (grpc.ForceServerCodecV2), installed
// with grpc.MaxRecvMsgSize(transportLimit()) and its unary and stream
// interceptors, innermost, so that the call log sees its refusals. It is the proto codec, except for a
// request it cannot accept: one over its size limit, or one that fails to
// decode (a string that is not UTF-8, or malformed wire data). grpc-go
// answers any codec error with a bare INTERNAL, before interceptors run; so
// requestCodec succeeds instead, leaves the message empty, and keeps the
// refusal, which its interceptors return, as a status with an ErrorInfo
// reason, in place of the handler's answer.
type requestCodec struct {
	base     encoding.CodecV2
	maxBytes int
	refusals sync.Map // the request message, as decoded into -> error
	views    bytesViews
}

// newRequestCodec returns a codec that refuses requests over maxBytes.
func newRequestCodec(maxBytes int) *requestCodec {
	return &requestCodec{base: encoding.GetCodecV2("proto"), maxBytes: maxBytes}
}

// transportLimit is the grpc.MaxRecvMsgSize that lets the codec see, and
// refuse with a reason, requests of up to transportLimitFactor times its
// limit.
func (c *requestCodec) transportLimit() int {
	if c.maxBytes > math.MaxInt32/transportLimitFactor {
		return math.MaxInt32
	}
	return c.maxBytes * transportLimitFactor
}

func (c *requestCodec) Name() string { return c.base.Name() }

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

// Unmarshal decodes data into v, or, when v cannot take it, leaves v empty,
// keeps the reason for c.refusal and returns nil.
func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	if n := data.Len(); n > c.maxBytes {
		proto.Reset(m)
		c.refusals.Store(v, &RequestSizeError{Size: n, Limit: c.maxBytes})
		return nil
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := proto.Unmarshal(b, m)
	if err == nil {
		return nil
	}
	proto.Reset(m)
	c.refusals.Store(v, c.decodeError(m.ProtoReflect().Descriptor(), b, err))
	return nil
}

// decodeError explains why b, which proto.Unmarshal refused with err, is not
// a valid md: the first string field that is not UTF-8 (INVALID_UTF8, with
// its path), else malformed wire data (INVALID_ARGUMENT, with err's text).
func (c *requestCodec) decodeError(md protoreflect.MessageDescriptor, b []byte, err error) error {
	if fe := c.views.invalidUTF8(md, b); fe != nil {
		return fe
	}
	return fmt.Errorf("%w: the request is not a well-formed %s: %v", ErrInvalidArgument, md.FullName(), err)
}

// refusal returns, once, the error kept for the message m was decoded into;
// nil when m was accepted.
func (c *requestCodec) refusal(m any) error {
	if err, ok := c.refusals.LoadAndDelete(m); ok {
		return err.(error)
	}
	return nil
}

// unary answers a refused request with its status instead of calling the
// handler.
func (c *requestCodec) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.refusal(req); err != nil {
		return nil, ToStatus(err).Err()
	}
	return handler(ctx, req)
}

// stream makes RecvMsg return a refused message's status, which ends the
// stream with it when the handler returns the error, as handlers do.
func (c *requestCodec) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &refusingStream{ServerStream: ss, codec: c})
}

type refusingStream struct {
	grpc.ServerStream
	codec *requestCodec
}

func (s *refusingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.codec.refusal(m); err != nil {
		return ToStatus(err).Err()
	}
	return nil
}
