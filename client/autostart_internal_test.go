package client

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestAutostartSystemDaemon: with nothing at the per-user default but the
// system's daemon answering (contrib/systemd's socket), ensure returns the
// system's address and starts nothing.
func TestAutostartSystemDaemon(t *testing.T) {
	dir, err := os.MkdirTemp("", "sps")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lis, err := net.Listen("unix", filepath.Join(dir, "system.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	old := systemAddr
	systemAddr = "unix:" + filepath.Join(dir, "system.sock")
	defer func() { systemAddr = old }()
	state := filepath.Join(dir, "st")
	a := &autostarter{addr: "unix:" + filepath.Join(state, "savepoint.sock"), sock: filepath.Join(state, "savepoint.sock"),
		stateDir: state, getenv: func(string) string { return "" }, stderr: os.Stderr}
	got, err := a.ensure(context.Background())
	if err != nil || got != systemAddr {
		t.Fatalf("ensure = %q, %v; want %q", got, err, systemAddr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state directory was created: %v", err)
	}
	lis.Close()
	if _, err := a.ensure(context.Background()); err == nil {
		t.Errorf("with neither answering and no savepointd, ensure succeeded")
	}
}
