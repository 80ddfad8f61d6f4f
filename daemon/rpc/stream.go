package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// DefaultCallStreamMaxInFlight is how many calls one CallStream handles at
// once unless configured otherwise.
const DefaultCallStreamMaxInFlight = 64

// StreamOptions configure NewStreamServer.
type StreamOptions struct {
	// MaxInFlight is how many calls one stream handles at once; the stream
	// reads no further request until one is answered. Zero means
	// DefaultCallStreamMaxInFlight.
	MaxInFlight int
	// Interceptor wraps each carried call as the server's unary
	// interceptors wrap a unary call (metrics, call log, access check, panic
	// recovery), with the unary RPC's full method name; nil calls the
	// handler directly.
	Interceptor grpc.UnaryServerInterceptor
	// StreamInterceptor wraps each carried call of a server-streaming RPC
	// (GetCheckpoint) as the server's stream interceptors wrap the RPC; nil
	// calls the handler directly.
	StreamInterceptor grpc.StreamServerInterceptor
	// Logger receives the panics recovered from a handler; nil means
	// slog.Default().
	Logger *slog.Logger
}

// StreamServer serves CallStreamService: each carried request goes to the
// handler of its RPC on the SavepointService and GraphCheckpointService
// servers given, through the same interceptors as the RPC's own call, so
// that a call is validated, applied and answered as its RPC would be.
type StreamServer struct {
	savepointv1.UnimplementedCallStreamServiceServer

	methods map[protoreflect.FieldNumber]*streamMethod // by CallStreamRequest field
	opts    StreamOptions
}

// streamMethod is one RPC as CallStream carries it: a unary one (call) or
// a server-streaming one (stream).
type streamMethod struct {
	fullMethod string
	server     any                // nil when the daemon does not serve the RPC's service
	call       reflect.Value      // a unary RPC's server method, func(ctx, *Req) (*Resp, error)
	stream     grpc.StreamHandler // a server-streaming RPC's generated handler
	service    string
	response   protoreflect.FieldDescriptor // its CallStreamResponse field
}

var (
	streamRequestFields  = (&savepointv1.CallStreamRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("request").Fields()
	streamResponseFields = (&savepointv1.CallStreamResponse{}).ProtoReflect().Descriptor().Oneofs().ByName("response").Fields()
	errorField           = streamResponseFields.ByName("error")
)

// NewStreamServer returns the CallStreamService over session (required) and
// graph (nil when the store keeps no graph checkpoints: their calls are
// answered UNIMPLEMENTED, as their own RPCs are). Each request field of
// CallStreamRequest is matched, by its message type, to the RPC of the two
// services that takes it: every unary RPC must be carried, and a
// server-streaming one is when CallStreamRequest has a field for it.
func NewStreamServer(session savepointv1.SavepointServiceServer, graph savepointv1.GraphCheckpointServiceServer, opts StreamOptions) *StreamServer {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultCallStreamMaxInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &StreamServer{methods: map[protoreflect.FieldNumber]*streamMethod{}, opts: opts}
	services := []struct {
		desc   protoreflect.ServiceDescriptor
		grpc   *grpc.ServiceDesc
		server any
	}{
		{savepointv1.File_savepoint_v1_savepoint_proto.Services().ByName("SavepointService"), &savepointv1.SavepointService_ServiceDesc, session},
		{savepointv1.File_savepoint_v1_graph_proto.Services().ByName("GraphCheckpointService"), &savepointv1.GraphCheckpointService_ServiceDesc, graph},
	}
	for _, svc := range services {
		serving := svc.server != nil && !reflect.ValueOf(svc.server).IsNil()
		for i := range svc.desc.Methods().Len() {
			m := svc.desc.Methods().Get(i)
			if m.IsStreamingClient() {
				continue
			}
			req, resp := streamField(streamRequestFields, m.Input()), streamField(streamResponseFields, m.Output())
			if m.IsStreamingServer() && req == nil {
				continue
			}
			if req == nil || resp == nil {
				panic(fmt.Sprintf("rpc: CallStreamRequest and CallStreamResponse must carry %s", m.FullName()))
			}
			sm := &streamMethod{fullMethod: fmt.Sprintf("/%s/%s", svc.desc.FullName(), m.Name()), service: string(svc.desc.FullName()), response: resp}
			switch {
			case !serving:
			case m.IsStreamingServer():
				i := slices.IndexFunc(svc.grpc.Streams, func(d grpc.StreamDesc) bool { return d.StreamName == string(m.Name()) })
				sm.server, sm.stream = svc.server, svc.grpc.Streams[i].Handler
			default:
				sm.server, sm.call = svc.server, reflect.ValueOf(svc.server).MethodByName(string(m.Name()))
			}
			s.methods[req.Number()] = sm
		}
	}
	return s
}

// streamField is the field of fields whose message type is md, or nil.
func streamField(fields protoreflect.FieldDescriptors, md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && f.Message().FullName() == md.FullName() {
			return f
		}
	}
	return nil
}

// CallStream implements CallStreamServiceServer. It handles up to
// MaxInFlight calls at once, each on its own goroutine, and reads the next
// request only when fewer are running, so that a client that sends faster
// than the daemon answers, or does not read its answers, is held back by
// the transport's flow control rather than buffered. When the client closes
// its side, the calls running are answered before the stream ends; when
// the client cancels, their context is cancelled.
func (s *StreamServer) CallStream(stream savepointv1.CallStreamService_CallStreamServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	slots := make(chan struct{}, s.opts.MaxInFlight)
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	defer wg.Wait()
	send := func(resp *savepointv1.CallStreamResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr != nil {
			return sendErr
		}
		if err := stream.Send(resp); err != nil {
			sendErr = err
			cancel()
		}
		return sendErr
	}
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		req := new(savepointv1.CallStreamRequest)
		if err := stream.RecvMsg(req); err != nil {
			<-slots
			if errors.Is(err, io.EOF) {
				wg.Wait()
				sendMu.Lock()
				defer sendMu.Unlock()
				return sendErr
			}
			var refused *refusedError
			if !errors.As(err, &refused) {
				cancel()
				return err
			}
			send(&savepointv1.CallStreamResponse{Id: req.GetId(), Response: errorResponse(refused.st)})
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			_ = send(s.dispatch(ctx, req, send))
		})
	}
}

// dispatch answers one call: its RPC's handler through the interceptors,
// the answer or error put in the response envelope it returns. A
// server-streaming RPC's messages but the last are sent on with send as
// they come, and its last is returned. A panic that gets past the
// interceptors is answered INTERNAL and logged; the stream goes on.
func (s *StreamServer) dispatch(ctx context.Context, req *savepointv1.CallStreamRequest, send func(*savepointv1.CallStreamResponse) error) (resp *savepointv1.CallStreamResponse) {
	resp = &savepointv1.CallStreamResponse{Id: req.GetId()}
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
			resp.Response = errorResponse(ToStatus(errors.New("panic")))
		}
	}()
	rm := req.ProtoReflect()
	fd := rm.WhichOneof(rm.Descriptor().Oneofs().ByName("request"))
	if fd == nil {
		resp.Response = errorResponse(ToStatus(fieldErr("request", reasonMissingField, "is not set; set the request of one RPC")))
		return resp
	}
	m, ok := s.methods[fd.Number()]
	if !ok || m.server == nil {
		service := "savepoint.v1.CallStreamService"
		if ok {
			service = m.service
		}
		resp.Response = errorResponse(status.Newf(codes.Unimplemented, "unknown service %s", service))
		return resp
	}
	in := rm.Get(fd).Message().Interface()
	if m.stream != nil {
		return s.dispatchStream(ctx, req.GetId(), m, in, send)
	}
	handler := func(ctx context.Context, in any) (any, error) {
		out := m.call.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(in)})
		if err, _ := out[1].Interface().(error); err != nil {
			return nil, err
		}
		return out[0].Interface(), nil
	}
	var out any
	var err error
	if s.opts.Interceptor != nil {
		out, err = s.opts.Interceptor(ctx, in, &grpc.UnaryServerInfo{Server: m.server, FullMethod: m.fullMethod}, handler)
	} else {
		out, err = handler(ctx, in)
	}
	if err != nil {
		resp.Response = callError(err)
		return resp
	}
	resp.ProtoReflect().Set(m.response, protoreflect.ValueOfMessage(out.(proto.Message).ProtoReflect()))
	return resp
}

// dispatchStream answers a call of a server-streaming RPC: its generated
// handler, through the stream interceptors, reads in from a carriedStream,
// whose messages go out one behind so that the last is returned without
// more set (or, for a stream of no message, an empty response).
func (s *StreamServer) dispatchStream(ctx context.Context, id uint64, m *streamMethod, in proto.Message, send func(*savepointv1.CallStreamResponse) error) *savepointv1.CallStreamResponse {
	cs := &carriedStream{ctx: ctx, in: in, id: id, field: m.response, send: send}
	var err error
	if s.opts.StreamInterceptor != nil {
		err = s.opts.StreamInterceptor(m.server, cs, &grpc.StreamServerInfo{FullMethod: m.fullMethod, IsServerStream: true}, m.stream)
	} else {
		err = m.stream(m.server, cs)
	}
	if err == nil && cs.held != nil {
		return cs.held
	}
	if cs.held != nil { // sent before the error that ends the call
		cs.held.More = true
		_ = send(cs.held)
	}
	resp := &savepointv1.CallStreamResponse{Id: id}
	if err != nil {
		resp.Response = callError(err)
	}
	return resp
}

// carriedStream is the grpc.ServerStream a server-streaming RPC's handler
// runs on inside a CallStream: RecvMsg gives the carried request once, and
// SendMsg holds each message (a copy: a handler may reuse it) until the
// next, sending the one held with more set.
type carriedStream struct {
	ctx   context.Context
	in    proto.Message // the request, until read
	id    uint64
	field protoreflect.FieldDescriptor
	send  func(*savepointv1.CallStreamResponse) error
	held  *savepointv1.CallStreamResponse
}

func (c *carriedStream) SetHeader(metadata.MD) error  { return nil }
func (c *carriedStream) SendHeader(metadata.MD) error { return nil }
func (c *carriedStream) SetTrailer(metadata.MD)       {}
func (c *carriedStream) Context() context.Context     { return c.ctx }

func (c *carriedStream) SendMsg(m any) error {
	if c.held != nil {
		c.held.More = true
		if err := c.send(c.held); err != nil {
			return err
		}
	}
	c.held = &savepointv1.CallStreamResponse{Id: c.id}
	c.held.ProtoReflect().Set(c.field, protoreflect.ValueOfMessage(proto.Clone(m.(proto.Message)).ProtoReflect()))
	return nil
}

func (c *carriedStream) RecvMsg(m any) error {
	if c.in == nil {
		return io.EOF
	}
	proto.Merge(m.(proto.Message), c.in)
	c.in = nil
	return nil
}

// callError is the response envelope's error for a handler's err: its
// status, or for an error that is none its translation.
func callError(err error) *savepointv1.CallStreamResponse_Error {
	st, ok := status.FromError(err)
	if !ok {
		st = ToStatus(err)
	}
	return errorResponse(st)
}

// errorResponse is the response envelope's error: st as the serialized
// google.rpc.Status its unary call sends in grpc-status-details-bin.
func errorResponse(st *status.Status) *savepointv1.CallStreamResponse_Error {
	b, err := proto.Marshal(st.Proto())
	if err != nil { // a Status always marshals; keep the code if it did not
		b, _ = proto.Marshal(status.New(st.Code(), st.Message()).Proto())
	}
	return &savepointv1.CallStreamResponse_Error{Error: b}
}

// ChainUnary returns the interceptors as one, the first outermost, as
// grpc.ChainUnaryInterceptor chains them for a unary call.
func ChainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		h := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, next := ics[i], h
			h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
		}
		return h(ctx, req)
	}
}

// ChainStream returns the interceptors as one, the first outermost, as
// grpc.ChainStreamInterceptor chains them for a stream.
func ChainStream(ics ...grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		h := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, next := ics[i], h
			h = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, next) }
		}
		return h(srv, ss)
	}
}
