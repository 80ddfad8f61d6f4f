package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestPostgresPgBouncer runs savepointd with --store-url through a real
// PgBouncer in transaction pooling with the simple protocol: a save and
// resume round trip, the next calls after PgBouncer ended the idle client
// and server connections, UNAVAILABLE and NOT_SERVING while PgBouncer is
// down, and serving again once it is back. In pgx's default exec mode savepointd exits with
// the configuration exit code, naming the exec mode to use, instead of
// waiting for a database it can reach.
func TestPostgresPgBouncer(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgtest.NewBouncer(t, srv, pgtest.BouncerOptions{
		ServerIdleTimeout: 500 * time.Millisecond, ServerLifetime: time.Second, ClientIdleTimeout: time.Second})
	db := srv.NewDatabase(t)
	bin := daemontest.Binary(t)
	d := daemontest.StartBinary(t, bin, "--store-url", b.URL(db, "default_query_exec_mode=simple_protocol"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	saved, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", Task: "report",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"hello"`}}})
	if err != nil || saved.GetRevision() != 1 {
		t.Fatalf("save: %v %v", saved, err)
	}
	resumed, err := d.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "s"})
	if err != nil || resumed.GetEpoch() != 2 || resumed.GetCheckpoint().GetTask() != "report" || resumed.GetCheckpoint().GetMessageCount() != 1 {
		t.Fatalf("resume: %v %v", resumed, err)
	}

	// Idle past PgBouncer's client and server idle timeouts.
	for deadline := time.Now().Add(15 * time.Second); b.Connections(t, "CLIENTS", db)+b.Connections(t, "SERVERS", db) > 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PgBouncer did not end the idle connections\n%s", b.Log())
		}
	}
	if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 2,
		AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `"hi"`}}}); err != nil {
		t.Fatalf("save after idling: %v", err)
	}
	resumed, err = d.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "s"})
	if err != nil || resumed.GetEpoch() != 3 || resumed.GetCheckpoint().GetRevision() != 2 || resumed.GetCheckpoint().GetMessageCount() != 2 {
		t.Fatalf("resume after idling: %v %v", resumed, err)
	}

	// PgBouncer down, then back on the same address.
	b.Kill()
	_, err = d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 2, Epoch: 3})
	if status.Code(err) != codes.Unavailable || reasonOf(err) != "UNAVAILABLE" {
		t.Fatalf("save with PgBouncer down: %v (reason %q)", err, reasonOf(err))
	}
	daemontest.WaitHealth(t, d.Conn, healthpb.HealthCheckResponse_NOT_SERVING)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitHealth(t, d.Conn, healthpb.HealthCheckResponse_SERVING)
	if saved, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 2, Epoch: 3}); err != nil || saved.GetRevision() != 3 {
		t.Fatalf("save once PgBouncer is back: %v %v", saved, err)
	}
	if got, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"}); err != nil || got.GetCheckpoint().GetRevision() != 3 {
		t.Fatalf("read once PgBouncer is back: %v %v", got, err)
	}
	if code := d.Stop(); code != exitOK {
		t.Fatalf("savepointd exited %d:\n%s", code, d.Stderr())
	}

	// The default exec mode through PgBouncer: refused at start.
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	cmd := exec.CommandContext(rctx, bin, "--store-url", b.URL(db), "--data-dir", t.TempDir(), "--listen", "unix:"+daemontest.SocketPath(t))
	out, err := cmd.CombinedOutput()
	if rctx.Err() != nil || cmd.ProcessState.ExitCode() != exitConfig || !strings.Contains(string(out), "default_query_exec_mode=simple_protocol") {
		t.Fatalf("savepointd in the default exec mode through PgBouncer: %v (exit %d, want %d)\n%s", err, cmd.ProcessState.ExitCode(), exitConfig, out)
	}
}
