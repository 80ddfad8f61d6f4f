package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The heartbeat intervals WatchSessions accepts, and its default.
const (
	defaultHeartbeat = 10 * time.Second
	minHeartbeat     = 100 * time.Millisecond
	maxHeartbeat     = time.Hour
)

// errShutdown ends the watches when the server shuts down.
var errShutdown = fmt.Errorf("%w: the daemon is shutting down; watch again once it is back", core.ErrUnavailable)

// validateWatch checks a WatchSessions request and returns it as a
// WatchRequest.
func validateWatch(req *savepointv1.WatchSessionsRequest) (core.WatchRequest, error) {
	f, idle, err := validateFilter(req.GetLabelFilter(), req.GetStatusFilter(), req.GetHasPendingToolUses(), req.GetMinIdle())
	if err != nil {
		return core.WatchRequest{}, err
	}
	wr := core.WatchRequest{Filter: f, MinIdle: idle, Heartbeat: defaultHeartbeat}
	if d := req.GetHeartbeatInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return core.WatchRequest{}, fieldErr("heartbeat_interval", reasonInvalidArgument, "is not a valid duration: %v", err)
		}
		switch hb := d.AsDuration(); {
		case hb == 0:
		case hb < minHeartbeat || hb > maxHeartbeat:
			return core.WatchRequest{}, fieldErr("heartbeat_interval", reasonInvalidArgument,
				"is %v; give between %v and %v, or leave it unset for %v", hb, minHeartbeat, maxHeartbeat, defaultHeartbeat)
		default:
			wr.Heartbeat = hb
		}
	}
	return wr, nil
}

// WatchSessions implements SavepointServiceServer (core.Watch says what it
// sends). It ends with the caller's cancellation, or UNAVAILABLE when the
// server shuts down or the store fails.
func (s *Server) WatchSessions(req *savepointv1.WatchSessionsRequest, stream savepointv1.SavepointService_WatchSessionsServer) error {
	ctx := stream.Context()
	wr, err := validateWatch(req)
	if err != nil {
		return s.fail(ctx, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.shutdown, func() { cancel(errShutdown) })
	defer stop()
	err = core.Watch(ctx, s.store, s.hub, wr, func(e core.WatchEvent) error {
		return stream.Send(watchEventToProto(e))
	})
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errShutdown):
		err = cause
	case ctx.Err() != nil:
		err = ctx.Err() // the caller left: a failed Send says no more
	}
	return s.fail(ctx, err)
}

func watchEventToProto(e core.WatchEvent) *savepointv1.WatchSessionsResponse {
	r := &savepointv1.WatchSessionsResponse{SessionId: e.SessionID, SendTime: timestamppb.Now()}
	switch e.Kind {
	case core.WatchChanged:
		r.Type, r.Session = savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED, summaryToProto(e.Summary)
	case core.WatchRemoved:
		r.Type = savepointv1.WatchEventType_WATCH_EVENT_TYPE_REMOVED
	case core.WatchHeartbeat:
		r.Type = savepointv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT
	case core.WatchResync:
		r.Type = savepointv1.WatchEventType_WATCH_EVENT_TYPE_RESYNC
	}
	return r
}
