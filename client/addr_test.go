package client

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/internal/addr/addrtest"
)

func TestDefaultAddr(t *testing.T) {
	t.Setenv("SAVEPOINT_ADDR", "unix:/tmp/from-env.sock")
	if got := DefaultAddr(); got != "unix:/tmp/from-env.sock" {
		t.Errorf("DefaultAddr() = %q", got)
	}
}

// TestParseAddr runs internal/addr's shared cases through the client's
// wrappers: the same endpoints, the same errors with the package's prefix.
func TestParseAddr(t *testing.T) {
	for _, tt := range addrtest.Load(t).Parse {
		t.Run(tt.Input, func(t *testing.T) {
			ep, err := parseAddr(tt.Input)
			verr := ValidateAddr(tt.Input)
			if tt.Input == "" {
				if verr != nil {
					t.Errorf("ValidateAddr(\"\") = %v, want nil (the default address)", verr)
				}
			} else if (verr == nil) != tt.OK {
				t.Errorf("ValidateAddr(%q) = %v, want ok=%v", tt.Input, verr, tt.OK)
			}
			if !tt.OK {
				if want := "savepoint: " + tt.Error; err == nil || err.Error() != want {
					t.Errorf("parseAddr(%q) = %+v, %v; want the error %q", tt.Input, ep, err, want)
				}
				return
			}
			if err != nil || ep.network != tt.Want.Network || ep.address != tt.Want.Address {
				t.Errorf("parseAddr(%q) = %+v, %v; want %s %s", tt.Input, ep, err, tt.Want.Network, tt.Want.Address)
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
