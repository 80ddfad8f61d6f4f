package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func TestWaitServing(t *testing.T) {
	t.Run("serving", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := client.WaitServing(ctx, ""); err != nil { // $SAVEPOINT_ADDR: TestMain's daemon
			t.Fatal(err)
		}
	})
	t.Run("started while waiting", func(t *testing.T) {
		cfg := daemon.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = "unix:" + daemontest.SocketPath(t)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- client.WaitServing(ctx, cfg.Listen) }()
		time.Sleep(100 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("returned %v before the daemon started", err)
		default:
		}
		_, stop, err := daemontest.Serve(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := client.WaitServing(ctx, "unix:"+daemontest.SocketPath(t))
		if err == nil || !strings.Contains(err.Error(), "not serving") {
			t.Fatalf("got %v, want a not-serving error", err)
		}
	})
	t.Run("bad address", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := client.WaitServing(ctx, "nonsense"); err == nil {
			t.Fatal("want an error for a malformed address")
		}
		if time.Since(start) > time.Second {
			t.Fatal("a malformed address should fail at once, not wait")
		}
	})
}
