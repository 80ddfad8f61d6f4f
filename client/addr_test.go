package client

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestDefaultAddr(t *testing.T) {
	t.Setenv("SAVEPOINT_ADDR", "unix:/tmp/from-env.sock")
	if got := DefaultAddr(); got != "unix:/tmp/from-env.sock" {
		t.Errorf("DefaultAddr() = %q", got)
	}
}

func TestParseAddr(t *testing.T) {
	tests := []struct {
		addr    string
		network string
		address string
		bad     bool
	}{
		{addr: "unix:/run/savepoint/savepoint.sock", network: "unix", address: "/run/savepoint/savepoint.sock"},
		{addr: "unix:relative/sp.sock", network: "unix", address: "relative/sp.sock"},
		{addr: "unix:///tmp/sp.sock", network: "unix", address: "/tmp/sp.sock"},
		{addr: "unix:/tmp/odd #%?.sock", network: "unix", address: "/tmp/odd #%?.sock"},
		{addr: "127.0.0.1:7070", network: "tcp", address: "127.0.0.1:7070"},
		{addr: "localhost:7070", network: "tcp", address: "localhost:7070"},
		{addr: "[::1]:7070", network: "tcp", address: "[::1]:7070"},
		{addr: "unix:", bad: true},
		{addr: "unix://relative", bad: true},
		{addr: "localhost", bad: true},
		{addr: "localhost:", bad: true},
		{addr: "/run/savepoint/savepoint.sock", bad: true},
		{addr: "http://localhost:7070", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ep, err := parseAddr(tt.addr)
			if verr := ValidateAddr(tt.addr); (verr != nil) != tt.bad {
				t.Errorf("ValidateAddr(%q) = %v", tt.addr, verr)
			}
			if tt.bad {
				if err == nil {
					t.Fatalf("got %+v, want an error", ep)
				}
				return
			}
			if err != nil || ep.network != tt.network || ep.address != tt.address {
				t.Errorf("got %+v, %v; want %s %s", ep, err, tt.network, tt.address)
			}
		})
	}
}

func TestDialBadAddr(t *testing.T) {
	if _, err := Dial(t.Context(), "nonsense"); err == nil {
		t.Fatal("Dial accepted an address that is neither unix:PATH nor HOST:PORT")
	}
}

func TestDialUnixNoDaemon(t *testing.T) {
	sock := "unix:" + t.TempDir() + "/none.sock"
	c, err := Dial(t.Context(), sock, WithRetry(RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err) // Dial does not wait by default
	}
	defer c.Close()
	_, err = c.Resume(t.Context(), "s1")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Resume with no daemon: %v, want ErrUnavailable", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := Dial(ctx, sock, WithWaitReady()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Dial WithWaitReady with no daemon: %v, want ErrUnavailable", err)
	}
}
