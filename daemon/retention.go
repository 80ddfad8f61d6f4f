package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// idleSweeper deletes what was not written since a cutoff; GraphStore's
// DeleteIdleThreads is one.
type idleSweeper interface {
	DeleteIdleThreads(ctx context.Context, cutoff time.Time) (int, error)
}

// retentionInterval is how often --retain-idle sweeps: a tenth of the
// retention, between a second and an hour, so that nothing outlives it by
// more than a tenth.
func retentionInterval(retain time.Duration) time.Duration {
	return min(max(retain/10, time.Second), time.Hour)
}

// startRetention starts the --retain-idle sweeps of store's graph threads
// when cfg.RetainIdle is set and store has graph threads; the returned stop
// ends them and waits until a sweep in progress has returned, so that the
// store can be closed after it.
func startRetention(cfg Config, store core.Store, logger *slog.Logger) (stop func()) {
	gs, ok := store.(core.GraphStore)
	if cfg.RetainIdle <= 0 || !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		sweepIdle(ctx, gs, cfg.RetainIdle, retentionInterval(cfg.RetainIdle), time.Now, logger)
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// sweepIdle deletes what s holds that was not written for retain, at once
// and then every interval, until ctx is done. A failed sweep is logged and
// tried again at the next tick.
func sweepIdle(ctx context.Context, s idleSweeper, retain, interval time.Duration, now func() time.Time, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cutoff := now().Add(-retain)
		n, err := s.DeleteIdleThreads(ctx, cutoff)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("retain idle: deleting idle graph threads failed; trying again at the next sweep",
				"err", err, "deleted", n, "retain_idle", retain)
		case n > 0:
			logger.Info("retain idle: deleted idle graph threads", "deleted", n, "idle_since", cutoff, "retain_idle", retain)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
