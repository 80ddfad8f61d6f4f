package client_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestFirstCallAfterOutage stops savepointd for 6 s (a call made meanwhile
// fails, leaving the connection in gRPC's reconnect backoff), restarts it on
// the same socket, and requires the first call on the existing client to
// succeed, three times: a retry-safe call waits for the connection within
// RetryPolicy.ReconnectWait.
func TestFirstCallAfterOutage(t *testing.T) {
	const outage = 6 * time.Second
	// TestMain moved the working directory out of the module: build the
	// daemon from this package's directory.
	_, here, _, _ := runtime.Caller(0)
	t.Chdir(filepath.Dir(here))
	d := daemontest.Start(t)
	c := dial(t, "unix:"+d.Socket)
	ctx := t.Context()
	if _, err := c.Start(ctx, "reconnect", "t", nil); err != nil {
		t.Fatal(err)
	}
	req := &savepointv1.GetSessionRequest{SessionId: "reconnect"}
	for round := range 3 {
		d.Kill()
		down := time.Now()
		if _, err := c.Raw().GetSession(ctx, req); !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("round %d: a call while the daemon is down: %v, want ErrUnavailable", round, err)
		}
		time.Sleep(outage - time.Since(down))
		d.Restart()
		start := time.Now()
		if _, err := c.Raw().GetSession(ctx, req); err != nil {
			t.Fatalf("round %d: the first call after the restart: %v", round, err)
		}
		if took := time.Since(start); took > outage {
			t.Errorf("round %d: the first call after the restart took %v", round, took)
		}
	}
}

// TestRetryWaitsForReconnect: with a retry budget of a few milliseconds, a
// call made while the daemon is down still succeeds once it is back a
// second later, because the retry waits for the connection (ReconnectWait);
// without that wait it fails.
func TestRetryWaitsForReconnect(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	t.Chdir(filepath.Dir(here))
	d := daemontest.Start(t)
	p := client.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, ReconnectWait: 10 * time.Second}
	c := dial(t, "unix:"+d.Socket, client.WithRetry(p))
	ctx := t.Context()
	if _, err := c.Start(ctx, "reconnect", "t", nil); err != nil {
		t.Fatal(err)
	}
	d.Kill()
	done := make(chan error, 1)
	go func() {
		_, err := c.Raw().GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "reconnect"})
		done <- err
	}()
	time.Sleep(time.Second)
	d.Restart()
	if err := <-done; err != nil {
		t.Fatalf("a call made while the daemon was down: %v, want success once it is back", err)
	}
}

// TestReconnectWaitBounded: on a daemon that stays down, a retry-safe call
// gives up about ReconnectWait after its first failure; one that is not
// retry-safe fails at once.
func TestReconnectWaitBounded(t *testing.T) {
	addr := "unix:" + daemontest.SocketPath(t)
	p := client.RetryPolicy{MaxAttempts: 50, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, ReconnectWait: 500 * time.Millisecond}
	c := dial(t, addr, client.WithRetry(p))
	start := time.Now()
	if _, err := c.Raw().GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: "s"}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("GetSession on a missing daemon: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 2*time.Second {
		t.Errorf("GetSession gave up after %v, want about 500ms", took)
	}
	start = time.Now()
	if _, err := c.Raw().DeleteSession(t.Context(), &savepointv1.DeleteSessionRequest{SessionId: "s"}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("DeleteSession on a missing daemon: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("DeleteSession, which is not retried, took %v", took)
	}
}
