package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// RequestIDHeader is the metadata key of a caller's request id: logged with
// its call, and sent back in the response header (one is generated when the
// caller sends none).
const RequestIDHeader = "x-request-id"

// maxRequestIDLen bounds a caller's x-request-id; a longer one is cut.
const maxRequestIDLen = 128

// NewLogger returns the daemon's logger writing to w in format ("text",
// "json", or "" for text) from level on.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	if err := checkLogFormat(format); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func checkLogFormat(format string) error {
	if format != "" && format != "text" && format != "json" {
		return fmt.Errorf("log format: %q is neither text nor json", format)
	}
	return nil
}

// writeMethods change the store; their successful calls are logged at info
// level with the caller, the rest at debug level.
var writeMethods = map[string]bool{
	savepointv1.SavepointService_SaveCheckpoint_FullMethodName: true,
	savepointv1.SavepointService_BeginEffect_FullMethodName:    true,
	savepointv1.SavepointService_RecordEffect_FullMethodName:   true,
	savepointv1.SavepointService_Resume_FullMethodName:         true,
	savepointv1.SavepointService_DeleteSession_FullMethodName:  true,
}

// logUnary logs each call's method, code, reason, duration, session id,
// request ids and caller, never its payload. Successful writes are logged at
// info level, successful reads at debug level, server faults at error level
// and other failures at info level.
func logUnary(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		rid := callRequestID(ctx)
		_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, rid))
		resp, err := handler(ctx, req)
		logCall(ctx, logger, info.FullMethod, start, err, rid, req)
		return resp, err
	}
}

// logStream logs each stream like logUnary logs a call, when it ends.
func logStream(logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		rid := callRequestID(ss.Context())
		_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, rid))
		err := handler(srv, ss)
		logCall(ss.Context(), logger, info.FullMethod, start, err, rid, nil)
		return err
	}
}

// callRequestID returns the caller's x-request-id, or a new random one.
func callRequestID(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 && v[0] != "" {
		rid := v[0]
		if len(rid) > maxRequestIDLen {
			rid = rid[:maxRequestIDLen]
		}
		return rid
	}
	return uuid.NewString()
}

func logCall(ctx context.Context, logger *slog.Logger, method string, start time.Time, err error, rid string, req any) {
	st := status.Convert(err)
	level := slog.LevelInfo
	switch st.Code() {
	case codes.OK:
		if !writeMethods[method] {
			level = slog.LevelDebug
		}
	case codes.Internal, codes.Unknown, codes.DataLoss, codes.Unavailable:
		level = slog.LevelError
	}
	if !logger.Enabled(ctx, level) {
		return
	}
	var buf [12]slog.Attr
	attrs := append(buf[:0],
		slog.String("method", method),
		slog.String("code", st.Code().String()),
	)
	if reason := reasonOf(err); reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(start)))
	if r, ok := req.(interface{ GetSessionId() string }); ok && r.GetSessionId() != "" {
		attrs = append(attrs, slog.String("session_id", r.GetSessionId()))
	}
	if r, ok := req.(interface{ GetRequestId() string }); ok && r.GetRequestId() != "" {
		attrs = append(attrs, slog.String("request_id", r.GetRequestId()))
	}
	attrs = append(attrs, slog.String("x_request_id", rid))
	attrs = appendPeerAttrs(attrs, ctx)
	// The record goes to the handler directly: Logger.LogAttrs would also
	// unwind the stack for the caller's PC, which NewLogger's handlers never
	// print (no AddSource), from as deep as a gRPC handler runs.
	r := slog.NewRecord(time.Now(), level, "call", 0)
	r.AddAttrs(attrs...)
	_ = logger.Handler().Handle(ctx, r)
}

// appendPeerAttrs appends to attrs what describes the caller: its uid, gid
// and pid on the Unix socket, its address and certificate subject over TCP.
func appendPeerAttrs(attrs []slog.Attr, ctx context.Context) []slog.Attr {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return attrs
	}
	switch ai := p.AuthInfo.(type) {
	case PeerCred:
		return append(attrs,
			slog.Uint64("peer_uid", uint64(ai.UID)),
			slog.Uint64("peer_gid", uint64(ai.GID)),
			slog.Uint64("peer_pid", uint64(ai.PID)),
		)
	case credentials.TLSInfo:
		attrs = append(attrs, slog.String("peer_addr", p.Addr.String()))
		if cs := ai.State; len(cs.PeerCertificates) > 0 {
			attrs = append(attrs, slog.String("peer_cert", certName(cs)))
		}
		return attrs
	}
	if p.Addr != nil {
		return append(attrs, slog.String("peer_addr", p.Addr.String()))
	}
	return attrs
}

func certName(cs tls.ConnectionState) string { return cs.PeerCertificates[0].Subject.String() }
