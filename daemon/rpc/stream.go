package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	// Logger receives the panics recovered from a handler; nil means
	// slog.Default().
	Logger *slog.Logger
}

// StreamServer serves CallStreamService: each carried request goes to the
// unary handler of its RPC on the SavepointService and GraphCheckpointService
// servers given, through the same interceptors as a unary call, so that a
// call is validated, applied and answered as its unary RPC would be.
type StreamServer struct {
	savepointv1.UnimplementedCallStreamServiceServer

	methods map[protoreflect.FieldNumber]*streamMethod // by CallStreamRequest field
	opts    StreamOptions
}

// streamMethod is one unary RPC as CallStream carries it.
type streamMethod struct {
	fullMethod string
	server     any           // nil when the daemon does not serve the RPC's service
	call       reflect.Value // the server's method, func(ctx, *Req) (*Resp, error)
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
// answered UNIMPLEMENTED, as the unary ones are). Each request field of
// CallStreamRequest is matched, by its message type, to the unary RPC of
// the two services that takes it.
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
		server any
	}{
		{savepointv1.File_savepoint_v1_savepoint_proto.Services().ByName("SavepointService"), session},
		{savepointv1.File_savepoint_v1_graph_proto.Services().ByName("GraphCheckpointService"), graph},
	}
	for _, svc := range services {
		for i := range svc.desc.Methods().Len() {
			m := svc.desc.Methods().Get(i)
			if m.IsStreamingClient() || m.IsStreamingServer() {
				continue
			}
			req, resp := streamField(streamRequestFields, m.Input()), streamField(streamResponseFields, m.Output())
			if req == nil || resp == nil {
				panic(fmt.Sprintf("rpc: CallStreamRequest and CallStreamResponse must carry %s", m.FullName()))
			}
			sm := &streamMethod{fullMethod: fmt.Sprintf("/%s/%s", svc.desc.FullName(), m.Name()), service: string(svc.desc.FullName()), response: resp}
			if v := reflect.ValueOf(svc.server); svc.server != nil && !v.IsNil() {
				sm.server, sm.call = svc.server, v.MethodByName(string(m.Name()))
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
	send := func(resp *savepointv1.CallStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr != nil {
			return
		}
		if err := stream.Send(resp); err != nil {
			sendErr = err
			cancel()
		}
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
			send(s.dispatch(ctx, req))
		})
	}
}

// dispatch answers one call: its RPC's handler through the interceptors,
// the answer or error put in the response envelope. A panic that gets past
// the interceptors is answered INTERNAL and logged; the stream goes on.
func (s *StreamServer) dispatch(ctx context.Context, req *savepointv1.CallStreamRequest) (resp *savepointv1.CallStreamResponse) {
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
		st, ok := status.FromError(err)
		if !ok {
			st = ToStatus(err)
		}
		resp.Response = errorResponse(st)
		return resp
	}
	resp.ProtoReflect().Set(m.response, protoreflect.ValueOfMessage(out.(proto.Message).ProtoReflect()))
	return resp
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
