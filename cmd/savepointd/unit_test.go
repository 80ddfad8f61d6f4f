package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/daemontest"
)

// unitSettings returns the values of key in contrib/systemd/savepointd.service.
func unitSettings(t *testing.T, key string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "contrib", "systemd", "savepointd.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vals []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			vals = append(vals, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestUnitWatchdogAbortRestarts runs savepointd with the unit's environment
// and sends it SIGABRT, the watchdog's signal, as systemd does when the pings
// stop: it must end in a way Restart=on-failure restarts, not with an exit
// status that RestartPreventExitStatus lists (the Go runtime's default for
// SIGABRT and for a panic is exit 2, the configuration-error status).
func TestUnitWatchdogAbortRestarts(t *testing.T) {
	var prevented []int
	for _, v := range unitSettings(t, "RestartPreventExitStatus") {
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("RestartPreventExitStatus %q: %v", f, err)
			}
			prevented = append(prevented, n)
		}
	}
	if len(prevented) == 0 {
		t.Fatal("the unit has no RestartPreventExitStatus")
	}
	dir := t.TempDir()
	sock := daemontest.SocketPath(t)
	cmd := exec.Command(daemontest.Binary(t), "--data-dir", filepath.Join(dir, "data"), "--listen", "unix:"+sock)
	cmd.Dir = dir // where a core would go
	cmd.Env = os.Environ()
	for _, v := range unitSettings(t, "Environment") {
		cmd.Env = append(cmd.Env, v)
	}
	stderr := &daemontest.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	if err := daemontest.WaitServing(sock, 20*time.Second, done); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr)
	}
	cmd.Process.Signal(syscall.SIGABRT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("savepointd survived SIGABRT")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		if ws.Signal() != syscall.SIGABRT {
			t.Errorf("died by %v, want SIGABRT", ws.Signal())
		}
	case slices.Contains(prevented, ws.ExitStatus()):
		t.Errorf("exit %d after SIGABRT is in RestartPreventExitStatus %v: systemd would not restart it", ws.ExitStatus(), prevented)
	}
	if !strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("no goroutine dump on SIGABRT; stderr:\n%s", stderr)
	}
}
