package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// socketActivate starts savepointd through systemd-socket-activate, which
// binds sock, waits for the first connection, and then executes savepointd
// with the socket in LISTEN_FDS, as a .socket unit does.
func socketActivate(t *testing.T, sock string, env []string, args ...string) (*exec.Cmd, *daemontest.SyncBuffer, <-chan struct{}) {
	t.Helper()
	sa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skipf("systemd-socket-activate is not installed (Debian: apt-get install systemd): %v", err)
	}
	argv := []string{"-l", sock}
	for _, e := range env {
		argv = append(argv, "-E", e) // it passes on only these, PATH, HOME, USER and TERM
	}
	argv = append(argv, daemontest.Binary(t))
	cmd := exec.Command(sa, append(argv, args...)...)
	stderr := &daemontest.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return cmd, stderr, done
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-socket-activate never bound %s; stderr:\n%s", sock, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSocketActivation starts the real savepointd through
// systemd-socket-activate: the first RPC, sent before savepointd runs,
// starts it and is answered on the passed socket; the readiness protocol
// runs (start timeout extended during the open, then READY=1, STOPPING=1 at
// SIGTERM), and the stop leaves the socket, which belongs to systemd, in
// place.
func TestSocketActivation(t *testing.T) {
	n := daemontest.StartNotify(t)
	sock := daemontest.SocketPath(t)
	cmd, stderr, done := socketActivate(t, sock, []string{n.Env},
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "unix:"+sock)

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := savepointv1.NewSavepointServiceClient(conn)
	// The socket file appears at bind, a moment before systemd-socket-activate
	// listens on it: wait for the connection instead of failing fast on a
	// refused dial.
	if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "activated"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("first RPC through the activated socket: %v\nstderr:\n%s", err, stderr)
	}
	got, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "activated"})
	if err != nil || got.GetCheckpoint().GetRevision() != 1 {
		t.Fatalf("GetSession after the save: %v, %v", got, err)
	}

	before := n.Wait(t, "READY=1", 10*time.Second)
	if !strings.HasPrefix(strings.Join(before, "\n"), "STATUS=opening the store\nEXTEND_TIMEOUT_USEC=") {
		t.Errorf("before READY=1: %q, want the start timeout extended while the store opens", before)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("savepointd did not stop on SIGTERM; stderr:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
	n.Wait(t, "STOPPING=1", 5*time.Second)
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the passed socket is gone after the stop (%v): a restart would lose its address", err)
	}
}

// TestSocketActivationWrongAddress checks that a passed socket on another
// address than --listen is refused as a configuration error (exit 2), naming
// both, instead of serving where clients do not look.
func TestSocketActivationWrongAddress(t *testing.T) {
	sock := daemontest.SocketPath(t)
	other := daemontest.SocketPath(t)
	cmd, stderr, done := socketActivate(t, sock, nil, "--data-dir", t.TempDir(), "--listen", "unix:"+other)
	if c, err := net.Dial("unix", sock); err == nil { // the connection that starts savepointd
		defer c.Close()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("savepointd kept running with a socket on the wrong address; stderr:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitConfig {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitConfig, stderr)
	}
	if s := stderr.String(); !strings.Contains(s, sock) || !strings.Contains(s, other) {
		t.Errorf("the error does not name both addresses:\n%s", s)
	}
}
