package client

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDefaultAddr(t *testing.T) {
	t.Setenv("SAVEPOINT_ADDR", "unix:/tmp/from-env.sock")
	if got := DefaultAddr(); got != "unix:/tmp/from-env.sock" {
		t.Errorf("DefaultAddr() = %q", got)
	}
}

// addrCases is internal/addr's shared address cases, found before TestMain
// changes the working directory.
var addrCases, _ = filepath.Abs("../internal/addr/testdata/addresses.json")

// TestParseAddr runs internal/addr's shared cases through the client's
// wrappers: the same endpoints, the same errors with the package's prefix.
func TestParseAddr(t *testing.T) {
	b, err := os.ReadFile(addrCases)
	if err != nil {
		t.Fatal(err)
	}
	var cases struct {
		Parse []struct {
			Input string `json:"input"`
			OK    bool   `json:"ok"`
			Want  struct {
				Network string `json:"network"`
				Address string `json:"address"`
			} `json:"want"`
			Error string `json:"error"`
		} `json:"parse"`
	}
	if err := json.Unmarshal(b, &cases); err != nil || len(cases.Parse) == 0 {
		t.Fatalf("the shared address cases: %v, %d cases", err, len(cases.Parse))
	}
	for _, tt := range cases.Parse {
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
