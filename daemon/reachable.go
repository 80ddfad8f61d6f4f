package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// reachInterval is how often Run checks a Reacher.
var reachInterval = 2 * time.Second

// watchReachable sets services NOT_SERVING while r is unreachable and
// SERVING once it is reachable again, logging each change, until ctx ends.
func watchReachable(ctx context.Context, r core.Reacher, hs *health.Server, services []string, logger *slog.Logger) {
	t := time.NewTicker(reachInterval)
	defer t.Stop()
	reachable := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, reachInterval)
		err := r.Reachable(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if (err == nil) == reachable {
			continue
		}
		reachable = err == nil
		st := healthpb.HealthCheckResponse_SERVING
		if reachable {
			logger.Info("the store is reachable again; health reports SERVING")
		} else {
			st = healthpb.HealthCheckResponse_NOT_SERVING
			logger.Error("the store is unreachable; health reports NOT_SERVING until it is back", "err", err)
		}
		for _, name := range services {
			hs.SetServingStatus(name, st)
		}
	}
}
