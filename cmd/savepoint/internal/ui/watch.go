package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// heartbeat is how often the daemon's WatchSessions stream, and so the
// page's event stream, says it is alive.
const heartbeat = 5 * time.Second

// row is a summary as the Sessions page shows it.
func row(x *savepointv1.SessionSummary) sessionRow {
	return sessionRow{ID: x.GetSessionId(), Task: x.GetTask(), State: sessionState(x),
		Created: formatTime(x.GetCreateTime()), Updated: formatTime(x.GetUpdateTime()), Labels: labelText(x.GetLabels()), Turn: x.GetTurn(),
		Revision: x.GetRevision(), Epoch: x.GetEpoch(), Pending: x.GetPendingToolUseCount(), InDoubt: x.GetInDoubtToolUseCount(),
		Resolved: fmt.Sprintf("%d/%d", x.GetResolvedByVerifyCount(), x.GetResolvedByPersonCount()), Awaiting: x.GetAwaitingApprovalCount()}
}

// events relays WatchSessions, with the Sessions page's filters, to the
// page as Server-Sent Events: "changed" with the session's row, "removed"
// with its id, "resync" when the daemon dropped events (the page reloads),
// and "unavailable" before the stream ends on an error, after which the
// browser's EventSource connects again by itself. --timeout bounds the wait
// for each response of the stream, heartbeats included.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	f, lreq, err := parseSessionFilters(r.URL.Query())
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "BAD_FILTER", err.Error())
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.refuse(w, r, http.StatusInternalServerError, "NO_STREAMING", "This connection cannot stream events.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		flusher.Flush()
	}
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The watchdog ends a stream that stays silent past a heartbeat and the
	// timeout: a daemon that went away without closing it.
	dog := time.AfterFunc(s.opts.Timeout, cancel)
	defer dog.Stop()
	stream, err := s.opts.Client.Raw().WatchSessions(ctx, &savepointv1.WatchSessionsRequest{
		LabelFilter: lreq.GetLabelFilter(), StatusFilter: lreq.GetStatusFilter(), HasPendingToolUses: lreq.GetHasPendingToolUses(),
		MinIdle: lreq.GetMinIdle(), HeartbeatInterval: durationpb.New(heartbeat)})
	for err == nil {
		var m *savepointv1.WatchSessionsResponse
		if m, err = stream.Recv(); err != nil {
			break
		}
		dog.Reset(heartbeat + s.opts.Timeout)
		switch m.GetType() {
		case savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED:
			if strings.HasPrefix(m.GetSessionId(), f.Prefix) {
				send("changed", row(m.GetSession()))
			}
		case savepointv1.WatchEventType_WATCH_EVENT_TYPE_REMOVED:
			send("removed", map[string]string{"id": m.GetSessionId()})
		case savepointv1.WatchEventType_WATCH_EVENT_TYPE_RESYNC:
			send("resync", map[string]string{})
		default:
			send("heartbeat", map[string]string{"time": formatTime(m.GetSendTime())})
		}
	}
	if r.Context().Err() == nil {
		d := describe(err)
		if st, _ := status.FromError(err); st.Code() == codes.Unavailable {
			d.Msg = "savepointd is not answering (" + st.Message() + ")."
		}
		if ctx.Err() != nil {
			d.Msg = "savepointd sent nothing, not even a heartbeat, within " + (heartbeat + s.opts.Timeout).String() + ". The page reconnects by itself."
		}
		send("unavailable", map[string]string{"reason": d.Reason, "code": d.Code, "message": d.Msg + " Live updates resume by themselves once it is back."})
	}
}
