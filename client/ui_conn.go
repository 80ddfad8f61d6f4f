package client

import (
	"google.golang.org/grpc/health/grpc_health_v1"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Graph returns a client of the daemon's GraphCheckpointService (the
// LangGraph checkpoints) on the same connection, with the same error
// translation as Raw.
func (c *Client) Graph() savepointv1.GraphCheckpointServiceClient {
	return savepointv1.NewGraphCheckpointServiceClient(c.conn)
}

// Health returns a client of the daemon's standard gRPC health service on
// the same connection.
func (c *Client) Health() grpc_health_v1.HealthClient { return grpc_health_v1.NewHealthClient(c.conn) }
