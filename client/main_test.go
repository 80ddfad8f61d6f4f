package client_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestMain serves a real savepointd in-process and points $SAVEPOINT_ADDR at
// it, so that the examples run against it from a scratch working directory.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" { // a client process of autostart_test.go
		os.Exit(autostartHelper())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spc")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := daemon.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = "unix:" + filepath.Join(dir, "s.sock")
	_, stop, err := daemontest.Serve(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	os.Setenv("SAVEPOINT_ADDR", cfg.Listen)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	os.WriteFile(filepath.Join(work, "sales-notes.txt"), []byte("Q3: 12 deals closed, 3 lost.\n"), 0o600)
	wd, _ := os.Getwd()
	os.Chdir(work) // the examples' tools read and write here
	defer os.Chdir(wd)
	return m.Run()
}
