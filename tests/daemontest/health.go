package daemontest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// WaitHealth polls the health of SavepointService on conn until it is want,
// failing t after 15 s.
func WaitHealth(t testing.TB, conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	health := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: savepointv1.SavepointService_ServiceDesc.ServiceName})
		cancel()
		if err == nil && res.GetStatus() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health is %v (%v), want %v", res.GetStatus(), err, want)
		}
	}
}
