package integration_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// probeStore is a real store whose liveness probe the test can fail.
type probeStore struct {
	*badgerstore.Store
	fail  atomic.Bool
	pings atomic.Int64
}

func (p *probeStore) Ping(ctx context.Context) error {
	p.pings.Add(1)
	if p.fail.Load() {
		return errors.New("probe failed by the test")
	}
	return p.Store.Ping(ctx)
}

// runNotified runs daemon.Run over a probeStore with the watchdog interval
// in WATCHDOG_USEC and WATCHDOG_PID set to pid; it returns the store, the
// socket, and the function that stops Run and returns its error.
func runNotified(t *testing.T, interval time.Duration, pid int) (*probeStore, string, func() error) {
	t.Helper()
	t.Setenv("WATCHDOG_USEC", strconv.FormatInt(interval.Microseconds(), 10))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(pid))
	st, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ps := &probeStore{Store: st}
	sock := daemontest.SocketPath(t)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Config{Listen: "unix:" + sock}, ps, slog.New(slog.DiscardHandler))
	}()
	stopped := false
	stop := func() error {
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return")
			return nil
		}
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return ps, sock, stop
}

func count(states []string, s string) int {
	n := 0
	for _, a := range states {
		if a == s {
			n++
		}
	}
	return n
}

// TestSystemdNotify drives Run's sd_notify and watchdog protocol with a fake
// NOTIFY_SOCKET: READY=1 only once an RPC is served, WATCHDOG=1 pings while
// the store's probe passes and none while it fails, STOPPING=1 at stop.
func TestSystemdNotify(t *testing.T) {
	n := daemontest.StartNotify(t)
	const interval = 200 * time.Millisecond
	ps, sock, stop := runNotified(t, interval, os.Getpid())

	before := n.Wait(t, "READY=1", 10*time.Second)
	if slices.Contains(before, "WATCHDOG=1") {
		t.Errorf("watchdog pings before READY=1: %q", before)
	}
	// Served the moment READY=1 arrives: no waiting for the server.
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := savepointv1.NewSavepointServiceClient(conn).GetServerInfo(rctx, &savepointv1.GetServerInfoRequest{}, grpc.WaitForReady(false)); err != nil {
		t.Fatalf("RPC right after READY=1: %v", err)
	}

	// A ping every quarter interval (50 ms) while the probe passes: 20 in
	// 1 s; fewer than 4 would leave the watchdog unfed for a whole interval.
	if got := count(n.Drain(time.Second), "WATCHDOG=1"); got < 4 {
		t.Errorf("%d watchdog pings in 1s with a %v interval, want at least 4", got, interval)
	}

	ps.fail.Store(true)
	n.Drain(interval / 2) // a ping whose probe passed may be on its way
	probes := ps.pings.Load()
	if got := n.Drain(3 * interval); slices.Contains(got, "WATCHDOG=1") {
		t.Errorf("watchdog pings while the probe fails: %q", got)
	}
	if ps.pings.Load()-probes < 2 {
		t.Errorf("%d probes in %v: the watchdog stopped probing instead of skipping pings", ps.pings.Load()-probes, 3*interval)
	}

	ps.fail.Store(false)
	n.Wait(t, "WATCHDOG=1", 2*time.Second) // pings resume once the probe passes

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Contains(n.Drain(200*time.Millisecond), "STOPPING=1") {
		t.Error("no STOPPING=1 at stop")
	}
}

// TestSystemdWatchdogOtherPID checks that WATCHDOG_PID naming another
// process turns the watchdog off: systemd watches that process, not this.
func TestSystemdWatchdogOtherPID(t *testing.T) {
	n := daemontest.StartNotify(t)
	ps, _, stop := runNotified(t, 100*time.Millisecond, os.Getpid()+1)
	n.Wait(t, "READY=1", 10*time.Second)
	if got := n.Drain(500 * time.Millisecond); slices.Contains(got, "WATCHDOG=1") || ps.pings.Load() != 0 {
		t.Errorf("pinged for another process's watchdog: %q, %d probes", got, ps.pings.Load())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
