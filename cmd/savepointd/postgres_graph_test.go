package main

import (
	"context"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestPostgresGraph: two savepointd on one PostgreSQL database serve
// GraphCheckpointService (health SERVING); a checkpoint put on A is read on
// B, and B, after A deletes the thread, drops a late write for it.
func TestPostgresGraph(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	bin := daemontest.Binary(t)
	a := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	b := daemontest.StartBinary(t, bin, "--store-url", srv.TCPURL(db, "default_query_exec_mode=simple_protocol"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := savepointv1.GraphCheckpointService_ServiceDesc.ServiceName
	for _, d := range []*daemontest.Daemon{a, b} {
		h, err := healthpb.NewHealthClient(d.Conn).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %s: %v %v", name, h, err)
		}
	}
	ga, gb := savepointv1.NewGraphCheckpointServiceClient(a.Conn), savepointv1.NewGraphCheckpointServiceClient(b.Conn)
	if _, err := ga.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{
		Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "t", CheckpointId: "1", MetadataJson: `{"k":1}`, ChannelVersions: map[string]string{"a": "1"}},
		Blobs:      []*savepointv1.ChannelBlob{{Channel: "a", Version: "1", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`"A"`)}}},
	}); err != nil {
		t.Fatal(err)
	}
	tp, err := graphtest.Get(ctx, gb, &savepointv1.GetCheckpointRequest{ThreadId: "t"}, 0)
	if err != nil || tp == nil || tp.Checkpoint.MetadataJson != `{"k":1}` || len(tp.Blobs) != 1 || string(tp.Blobs[0].Value.Data) != `"A"` {
		t.Fatalf("A's checkpoint read on B: %v %v", tp, err)
	}
	if _, err := ga.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	res, err := gb.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "x",
		Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`)}}}})
	if err != nil || !res.GetDroppedLate() {
		t.Fatalf("late write on B after A's delete: %v %v", res, err)
	}
	if tp, err := graphtest.Get(ctx, ga, &savepointv1.GetCheckpointRequest{ThreadId: "t"}, 0); err != nil || tp != nil {
		t.Fatalf("the thread came back: %v %v", tp, err)
	}

	if _, err := ga.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{
		Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "idle", CheckpointId: "1", MetadataJson: `{}`},
	}); err != nil {
		t.Fatal(err)
	}
	if tp, err := graphtest.Get(ctx, ga, &savepointv1.GetCheckpointRequest{ThreadId: "idle"}, 0); err != nil || tp == nil {
		t.Fatalf("before the sweep: %v %v", tp, err)
	}
	daemontest.StartBinary(t, bin, "--store-url", srv.URL(db), "--retain-idle", "1s")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tp, err := graphtest.Get(ctx, ga, &savepointv1.GetCheckpointRequest{ThreadId: "idle"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if tp == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("--retain-idle 1s did not delete the idle thread within 20 s")
		}
	}
}
