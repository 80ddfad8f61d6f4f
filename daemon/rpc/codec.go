package rpc

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec requestCodec builds on
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// transportLimitFactor is how many times Config.MaxRequestBytes the gRPC
// transport reads before refusing a request itself. Up to that size the
// service refuses an over-size request with REQUEST_TOO_LARGE and its sizes;
// above it grpc-go answers a bare RESOURCE_EXHAUSTED before any code of
// savepointd runs.
const transportLimitFactor = 4

// requestCodec is the server's codec: the proto codec, except for a request
// it cannot accept, one over its size limit or one that fails to decode (a
// string that is not UTF-8, or malformed wire data). grpc-go answers any
// codec error with a bare INTERNAL, before interceptors run; so requestCodec
// succeeds instead, leaves the message empty and keeps the refusal, which its
// interceptors return, as a status with an ErrorInfo reason, in place of the
// handler's answer. CodecOptions installs it with grpc.ForceServerCodecV2,
// grpc.MaxRecvMsgSize(transportLimit()) and its unary and stream interceptors
// last in their chains, so that the call log sees the refusals.
type requestCodec struct {
	base     encoding.CodecV2
	maxBytes int
	refusals sync.Map // the request message, as decoded into -> refusal
	views    bytesViews

	mu    sync.Mutex
	swept time.Time // when refuse last dropped orphans
}

// A refusal is kept from the decode to the interceptor, which follows at
// once in the same goroutine. One still kept after orphanAge belongs to a
// call whose interceptor never ran (one placed before it, such as an
// authorization check, ended the call), and is dropped, so that such calls
// cannot fill memory.
type refusal struct {
	err error
	at  time.Time
}

const orphanAge = time.Minute

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
	if env, ok := m.(*savepointv1.CallStreamRequest); ok {
		return c.unmarshalCall(data, env)
	}
	if n := data.Len(); n > c.maxBytes {
		proto.Reset(m)
		c.refuse(v, &requestSizeError{Size: n, Limit: c.maxBytes, Request: v})
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
	c.refuse(v, c.decodeError(m.ProtoReflect().Descriptor(), b, err))
	return nil
}

// unmarshalCall is Unmarshal for a CallStream call: the limit applies to the
// request it carries, as to the same request sent unary, and a refused call
// keeps its id, so that CallStream answers it and goes on.
func (c *requestCodec) unmarshalCall(data mem.BufferSlice, env *savepointv1.CallStreamRequest) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	id, inner, ib := callEnvelope(b)
	if size := len(ib); size > c.maxBytes {
		proto.Reset(env)
		env.Id = id
		var req any = env
		if inner != nil {
			req = inner.New().Interface()
		}
		c.refuse(env, &requestSizeError{Size: size, Limit: c.maxBytes, Request: req})
		return nil
	}
	err := proto.Unmarshal(b, env)
	if err == nil {
		return nil
	}
	proto.Reset(env)
	env.Id = id
	md := env.ProtoReflect().Descriptor()
	if inner != nil { // explain it as the unary call would
		md, b = inner.Descriptor(), ib
		if ierr := proto.Unmarshal(ib, inner.New().Interface()); ierr != nil {
			err = ierr
		}
	}
	c.refuse(env, c.decodeError(md, b, err))
	return nil
}

// callEnvelope reads a CallStreamRequest's wire form b for its id, the type
// of the request it carries (nil when none is recognized) and that
// request's wire form (b, when none).
func callEnvelope(b []byte) (id uint64, inner protoreflect.MessageType, ib []byte) {
	ib = b
	fields := (&savepointv1.CallStreamRequest{}).ProtoReflect().Descriptor().Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return id, inner, ib
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return id, inner, ib
			}
			id, b = v, b[n:]
			continue
		case typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return id, inner, ib
			}
			if f := fields.ByNumber(num); f != nil && f.Message() != nil {
				mt, err := protoregistry.GlobalTypes.FindMessageByName(f.Message().FullName())
				if err == nil {
					inner, ib = mt, v
				}
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return id, inner, ib
		}
		b = b[n:]
	}
	return id, inner, ib
}

// refuse keeps err for the message m, first dropping orphans at most once
// per orphanAge.
func (c *requestCodec) refuse(m any, err error) {
	now := time.Now()
	c.mu.Lock()
	if now.Sub(c.swept) >= orphanAge {
		c.swept = now
		c.refusals.Range(func(k, r any) bool {
			if now.Sub(r.(refusal).at) >= orphanAge {
				c.refusals.Delete(k)
			}
			return true
		})
	}
	c.mu.Unlock()
	c.refusals.Store(m, refusal{err: err, at: now})
}

// decodeError explains why b, which proto.Unmarshal refused with err, is not
// a valid md: the first string field that is not UTF-8 (INVALID_UTF8, with
// its path), else malformed wire data (INVALID_ARGUMENT, with err's text).
func (c *requestCodec) decodeError(md protoreflect.MessageDescriptor, b []byte, err error) error {
	if fe := c.views.invalidUTF8(md, b); fe != nil {
		return fe
	}
	return fmt.Errorf("%w: the request is not a well-formed %s: %v", core.ErrInvalidArgument, md.FullName(), err)
}

// refusal returns, once, the error kept for the message m was decoded into;
// nil when m was accepted.
func (c *requestCodec) refusal(m any) error {
	if r, ok := c.refusals.LoadAndDelete(m); ok {
		return r.(refusal).err
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
		return &refusedError{st: ToStatus(err)}
	}
	return nil
}

// refusedError is RecvMsg's error for a message the codec refused: its
// status, which ends a stream whose handler returns it, as handlers do, or
// which CallStream answers for the one call it refused.
type refusedError struct{ st *status.Status }

func (e *refusedError) Error() string              { return e.st.Err().Error() }
func (e *refusedError) GRPCStatus() *status.Status { return e.st }

// CodecOptions returns the server options that install the request codec
// refusing requests over maxBytes: the codec, the transport's receive limit,
// and its interceptors. Pass them after every other interceptor option, so
// that the codec's interceptors run innermost, after the call log and the
// access check.
func CodecOptions(maxBytes int) []grpc.ServerOption {
	c := newRequestCodec(maxBytes)
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(c),
		grpc.MaxRecvMsgSize(c.transportLimit()),
		grpc.ChainUnaryInterceptor(c.unary),
		grpc.ChainStreamInterceptor(c.stream),
	}
}
