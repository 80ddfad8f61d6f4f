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

	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// unitSettings returns the values of key in contrib/systemd/savepointd.service.
func unitSettings(t *testing.T, key string) []string {
	t.Helper()
	return fileSettings(t, "savepointd.service", key)
}

// fileSettings returns the values of key in contrib/systemd/name.
func fileSettings(t *testing.T, name, key string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "contrib", "systemd", name))
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
	cmd.Env = append(os.Environ(), unitSettings(t, "Environment")...)
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

// TestUnitDirectives pins the settings the units promise (issue 10 and
// docs/operations.md), which `systemd-analyze verify` cannot: it accepts a
// unit without any of them.
func TestUnitDirectives(t *testing.T) {
	want := map[string][][2]string{
		"savepointd.service": {
			{"Type", "notify"}, {"NotifyAccess", "main"}, {"WatchdogSec", "30s"},
			{"User", "savepoint"}, {"Group", "savepoint"},
			{"StateDirectory", "savepoint"}, {"UMask", "0077"},
			{"Restart", "on-failure"}, {"RestartPreventExitStatus", "2 3 4"},
			{"TimeoutStopSec", "30s"}, {"LimitNOFILE", "65536"},
			{"Environment", "SAVEPOINT_ADDR=unix:/run/savepoint/savepoint.sock"},
			{"Environment", "GOTRACEBACK=crash"},
			{"NoNewPrivileges", "yes"}, {"ProtectSystem", "strict"}, {"ProtectHome", "yes"},
			{"PrivateTmp", "yes"}, {"PrivateDevices", "yes"},
			{"RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"},
			{"SystemCallFilter", "@system-service"}, {"CapabilityBoundingSet", ""},
			{"MemoryDenyWriteExecute", "yes"},
			{"Requires", "savepointd.socket"},
		},
		"savepointd.socket": {
			{"ListenStream", "/run/savepoint/savepoint.sock"},
			{"SocketMode", "0660"}, {"SocketGroup", "savepoint"}, {"SocketUser", "savepoint"},
		},
	}
	for file, settings := range want {
		for _, kv := range settings {
			if !slices.Contains(fileSettings(t, file, kv[0]), kv[1]) {
				t.Errorf("%s lacks %s=%s", file, kv[0], kv[1])
			}
		}
	}
	// The socket unit owns /run/savepoint: a RuntimeDirectory would be
	// removed under the socket at each stop; DynamicUser cannot own the
	// socket's group.
	for _, key := range []string{"RuntimeDirectory", "DynamicUser"} {
		if v := fileSettings(t, "savepointd.service", key); len(v) > 0 {
			t.Errorf("savepointd.service sets %s=%v", key, v)
		}
	}
	// The service's data directory is the StateDirectory.
	if !slices.Contains(unitSettings(t, "Environment"), "SAVEPOINT_DATA_DIR=/var/lib/savepoint") {
		t.Error("savepointd.service does not point SAVEPOINT_DATA_DIR at its StateDirectory, /var/lib/savepoint")
	}
}
