package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestMain removes the PostgreSQL server the tests share (pgtest.Shared,
// each test on a database of its own); a test that stops its server starts
// one of its own (pgtest.New).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPostgresRefusals: with --store-url the embedded store's settings and
// subcommands are refused before anything is opened, each saying why.
func TestPostgresRefusals(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "unix:" + filepath.Join(t.TempDir(), "s.sock")
	const url = "postgres://u:s3cret@127.0.0.1:1/db"
	common := []string{"--listen", sock, "--data-dir", dir}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		says string
	}{
		{"disk reserve", []string{"--store-url", url, "--disk-reserve-bytes", "1"}, nil, "disk reserve bytes"},
		{"accept data loss", []string{"--store-url", url, "--accept-data-loss"}, nil, "accept data loss"},
		{"encryption key", []string{"--store-url", url, "--encryption-key-file", key}, nil, "database's encryption"},
		{"accept data loss, URL from env", []string{"--accept-data-loss"}, map[string]string{"SAVEPOINT_STORE_URL": url}, "accept data loss"},
		{"another scheme", []string{"--store-url", "mysql://u:s3cret@h/db"}, nil, "postgres://"},
		{"backup", []string{"backup", filepath.Join(dir, "b"), "--store-url", url}, nil, "pg_dump"},
		{"restore", []string{"restore", filepath.Join(dir, "b"), "--store-url", url}, nil, "pg_restore"},
		{"repair-manifest", []string{"repair-manifest", "--store-url", url}, nil, "MANIFEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			args := append(append([]string{}, tc.args...), common...)
			if lookupSubcommand(args[0]) != nil { // a command takes no --listen
				args = append(append([]string{}, tc.args...), "--data-dir", dir)
			}
			if code := run(args, envOf(tc.env), io.Discard, &stderr); code != exitConfig {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitConfig, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) || strings.Contains(stderr.String(), "s3cret") {
				t.Errorf("stderr does not say %q, or shows the password:\n%s", tc.says, stderr.String())
			}
		})
	}
	// The database unreachable: verify fails, saying so without the password
	// (serving waits for the database: TestPostgresDaemons).
	var stderr bytes.Buffer
	if code := run([]string{"verify", "--store-url", url + "?connect_timeout=2", "--data-dir", dir}, envOf(nil), io.Discard, &stderr); code != exitFail ||
		!strings.Contains(stderr.String(), "cannot reach PostgreSQL") || strings.Contains(stderr.String(), "s3cret") {
		t.Errorf("unreachable database: exit %d; stderr:\n%s", code, stderr.String())
	}
	var out bytes.Buffer
	if code := run([]string{"-h"}, envOf(nil), &out, io.Discard); code != exitOK || !strings.Contains(out.String(), "PostgreSQL (--store-url)") {
		t.Errorf("--help lacks the store table (exit %d):\n%s", code, out.String())
	}
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestPostgresDaemons runs two savepointd on one PostgreSQL database, as two
// hosts of a fleet: a session saved on A is resumed on B, A's stale epoch is
// fenced, both see one store; with the database stopped calls are
// UNAVAILABLE, and they succeed again once it is back.
func TestPostgresDaemons(t *testing.T) {
	srv := pgtest.New(t)
	db := srv.NewDatabase(t)
	bin := daemontest.Binary(t)
	a := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	b := daemontest.StartBinary(t, bin, "--store-url", srv.TCPURL(db, "default_query_exec_mode=simple_protocol"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	info, err := a.Client.GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
	if err != nil || info.GetStoreKind() != "postgres" || info.GetStoreFormat() != pgstore.SchemaVersion {
		t.Fatalf("server info: %v %v", info, err)
	}
	saved, err := a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", Task: "report",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"hello"`}}})
	if err != nil || saved.GetRevision() != 1 || saved.GetEpoch() != 1 {
		t.Fatalf("save on A: %v %v", saved, err)
	}
	resumed, err := b.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "s"})
	if err != nil || resumed.GetEpoch() != 2 || resumed.GetCheckpoint().GetTask() != "report" || resumed.GetCheckpoint().GetMessageCount() != 1 {
		t.Fatalf("resume on B: %v %v", resumed, err)
	}
	_, err = a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 1})
	if status.Code(err) != codes.Aborted || reasonOf(err) != "SESSION_FENCED" {
		t.Fatalf("A's stale save: %v (reason %q), want ABORTED SESSION_FENCED", err, reasonOf(err))
	}
	if _, err := b.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1, Epoch: 2}); err != nil {
		t.Fatalf("B's save: %v", err)
	}
	list, err := a.Client.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 10})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetRevision() != 2 || list.GetSessions()[0].GetEpoch() != 2 {
		t.Fatalf("list on A: %v %v", list, err)
	}
	ver, err := a.Client.Verify(ctx, &savepointv1.VerifyRequest{})
	if err != nil || ver.GetCheckedSessions() != 1 || len(ver.GetDamagedSessions()) != 0 {
		t.Fatalf("verify on A: %v %v", ver, err)
	}

	// A third daemon on A's data directory is refused: the per-host lock.
	cmd := exec.Command(bin, "--store-url", srv.URL(db), "--data-dir", a.DataDir, "--listen", "unix:"+daemontest.SocketPath(t))
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitLocked || !strings.Contains(string(out), "lock") {
		t.Fatalf("a second daemon on one data directory: %v\n%s", err, out)
	}

	daemontest.WaitHealth(t, a.Conn, healthpb.HealthCheckResponse_SERVING)
	srv.StopServer()
	daemontest.WaitHealth(t, a.Conn, healthpb.HealthCheckResponse_NOT_SERVING)
	_, err = a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 2, Epoch: 2})
	if status.Code(err) != codes.Unavailable || reasonOf(err) != "UNAVAILABLE" || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("save with the database down: %v (reason %q)", err, reasonOf(err))
	}
	if _, err := b.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("read with the database down: %v", err)
	}
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 2, Epoch: 2}); err != nil {
		t.Fatalf("save once the database is back: %v", err)
	}
	daemontest.WaitHealth(t, a.Conn, healthpb.HealthCheckResponse_SERVING)
	if !strings.Contains(a.Stderr(), "health reports NOT_SERVING") {
		t.Errorf("A did not log the outage:\n%s", a.Stderr())
	}
	got, err := b.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil || got.GetCheckpoint().GetRevision() != 3 {
		t.Fatalf("read on B once the database is back: %v %v", got, err)
	}
	if code := a.Stop(); code != exitOK {
		t.Fatalf("A exited %d:\n%s", code, a.Stderr())
	}
	if strings.Contains(a.Stderr(), "password") {
		t.Errorf("A logged a password:\n%s", a.Stderr())
	}

	// A daemon started while the database is down waits for it, then serves.
	srv.StopServer()
	restarted := make(chan error, 1)
	go func() { time.Sleep(3 * time.Second); restarted <- srv.StartServer() }()
	c := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if got, err := c.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"}); err != nil || got.GetCheckpoint().GetRevision() != 3 {
		t.Fatalf("read on a daemon that waited for the database: %v %v", got, err)
	}
	if !strings.Contains(c.Stderr(), "the database cannot be reached; retrying") {
		t.Errorf("the waiting daemon did not say why it waits:\n%s", c.Stderr())
	}

	// savepointd verify reads the same database.
	var stdout, stderr bytes.Buffer
	var rep struct{ CheckedSessions string }
	if code := run([]string{"verify", "--store-url", srv.URL(db), "--data-dir", t.TempDir()}, envOf(nil), &stdout, &stderr); code != exitOK ||
		json.Unmarshal(stdout.Bytes(), &rep) != nil || rep.CheckedSessions != "1" {
		t.Fatalf("savepointd verify: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}
