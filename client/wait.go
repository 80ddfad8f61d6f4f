package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// WaitServing returns nil once the daemon at addr ("" means DefaultAddr())
// reports SERVING on its health service, or an error naming the last answer
// when ctx ends first; a malformed address fails at once. Each poll dials
// anew, so a daemon that starts while WaitServing runs is seen within
// milliseconds rather than after gRPC's reconnect backoff. opts are Dial's
// (WithTLS for a TCP address that needs it).
func WaitServing(ctx context.Context, addr string, opts ...Option) error {
	const pollEvery = 5 * time.Millisecond
	var last error
	for {
		c, err := Dial(ctx, addr, opts...)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(c.conn).Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
		cancel()
		c.Close()
		switch {
		case err != nil:
			last = err
		case resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			return nil
		default:
			last = fmt.Errorf("health status %v", resp.GetStatus())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("savepoint: %s not serving: %w (last answer: %v)", addrOrDefault(addr), ctx.Err(), last)
		case <-time.After(pollEvery):
		}
	}
}

func addrOrDefault(a string) string {
	if a == "" {
		return DefaultAddr()
	}
	return a
}
