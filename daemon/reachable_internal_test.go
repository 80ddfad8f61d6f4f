package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

type flakyReacher struct{ down atomic.Bool }

func (f *flakyReacher) Reachable(context.Context) error {
	if f.down.Load() {
		return errors.New("down")
	}
	return nil
}

func TestWatchReachable(t *testing.T) {
	old := reachInterval
	reachInterval = 10 * time.Millisecond
	defer func() { reachInterval = old }()
	hs := health.NewServer()
	r := &flakyReacher{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchReachable(ctx, r, hs, []string{"", "svc"}, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	wait := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			a, _ := hs.Check(ctx, &healthpb.HealthCheckRequest{Service: ""})
			b, _ := hs.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
			if a.GetStatus() == want && b.GetStatus() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %v and %v, want %v", a.GetStatus(), b.GetStatus(), want)
			}
		}
	}
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	wait(healthpb.HealthCheckResponse_SERVING)
	r.down.Store(true)
	wait(healthpb.HealthCheckResponse_NOT_SERVING)
	r.down.Store(false)
	wait(healthpb.HealthCheckResponse_SERVING)
}
