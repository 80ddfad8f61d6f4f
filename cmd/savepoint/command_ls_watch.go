package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// watchHeartbeat is the heartbeat ls --watch asks WatchSessions for.
const watchHeartbeat = 5 * time.Second

// watchSessions is ls --watch: it starts WatchSessions with req's filters,
// prints the table once the watch is registered (so no change falls between
// the two), then one line per event until interrupted. --timeout bounds
// each RPC: the listing, and the wait for each response of the stream,
// which sends a heartbeat every watchHeartbeat.
func watchSessions(e *env, c *client.Client, req *savepointv1.ListSessionsRequest) error {
	ctx, cancel := context.WithCancel(e.untimed)
	defer cancel()
	var silent atomic.Bool
	dog := time.AfterFunc(e.cfg.Timeout, func() { silent.Store(true); cancel() })
	defer dog.Stop()
	stream, err := c.Raw().WatchSessions(ctx, &savepointv1.WatchSessionsRequest{
		LabelFilter: req.GetLabelFilter(), StatusFilter: req.GetStatusFilter(), HasPendingToolUses: req.GetHasPendingToolUses(),
		MinIdle: req.GetMinIdle(), HeartbeatInterval: durationpb.New(watchHeartbeat)})
	listed := false
	for err == nil {
		var m *savepointv1.WatchSessionsResponse
		if m, err = stream.Recv(); err != nil {
			break
		}
		dog.Reset(watchHeartbeat + e.cfg.Timeout)
		switch t := m.GetType(); {
		case !listed || t == savepointv1.WatchEventType_WATCH_EVENT_TYPE_RESYNC:
			if listed {
				fmt.Fprintln(e.stdout, "RESYNC   events were dropped; the sessions as they are now:")
			}
			lctx, lcancel := context.WithTimeout(ctx, e.cfg.Timeout)
			err = printSessions(lctx, e, c, req)
			lcancel()
			listed = true
		case t == savepointv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED:
			s := m.GetSession()
			fmt.Fprintf(e.stdout, "CHANGED  %s status=%s turn=%d revision=%d pending=%d in_doubt=%d resolved=%s awaiting=%d updated=%s\n", s.GetSessionId(), statusName(s.GetStatus()),
				s.GetTurn(), s.GetRevision(), s.GetPendingToolUseCount(), s.GetInDoubtToolUseCount(), resolvedCounts(s), s.GetAwaitingApprovalCount(), formatTime(s.GetUpdateTime()))
		case t == savepointv1.WatchEventType_WATCH_EVENT_TYPE_REMOVED:
			fmt.Fprintf(e.stdout, "REMOVED  %s\n", m.GetSessionId())
		}
	}
	switch {
	case e.untimed.Err() != nil:
		return nil // interrupted
	case silent.Load():
		return fmt.Errorf("savepointd sent nothing within %v, not even a heartbeat: %w", watchHeartbeat+e.cfg.Timeout, context.DeadlineExceeded)
	}
	return err
}
