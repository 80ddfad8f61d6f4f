package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestLogFile runs savepointd with --log-file and a tiny
// --log-file-max-size, as a client starting it on demand does: its log
// goes to the file, never past the size by more than a line, kept as the
// current file and one previous; a Go runtime dump (SIGABRT), written to
// stderr without the logger, lands in the current file; nothing reaches the
// stderr it was started with.
func TestLogFile(t *testing.T) {
	const limit = 2048
	dir := t.TempDir()
	logPath := filepath.Join(dir, "savepointd.log")
	sock := daemontest.SocketPath(t)
	cmd := exec.Command(daemontest.Binary(t), "--data-dir", filepath.Join(dir, "data"), "--listen", "unix:"+sock,
		"--log-level", "debug", "--log-file", logPath, "--log-file-max-size", "2KiB")
	stderr := &daemontest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	if err := daemontest.WaitServing(sock, 20*time.Second, done); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr)
	}
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := savepointv1.NewSavepointServiceClient(conn)
	for range 100 { // each logged at debug level: well over two files' worth
		if _, err := c.GetServerInfo(context.Background(), &savepointv1.GetServerInfoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	cur, prev := readFile(t, logPath), readFile(t, logPath+".1")
	for name, text := range map[string]string{logPath: cur, logPath + ".1": prev} {
		lines := strings.SplitAfter(text, "\n")
		if len(text) > limit || !strings.Contains(text, "GetServerInfo") || len(lines) < 2 {
			t.Errorf("%s: %d bytes (limit %d), want calls' lines under it:\n%s", name, len(text), limit, text)
		}
	}
	if _, err := os.Stat(logPath + ".2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.2: %v; want only the current file and one previous", logPath, err)
	}
	cmd.Process.Signal(syscall.SIGABRT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("savepointd survived SIGABRT")
	}
	if all := readFile(t, logPath) + readFile(t, logPath+".1"); !strings.Contains(all, "goroutine ") {
		t.Errorf("no goroutine dump in the log file after SIGABRT")
	}
	if stderr.String() != "" {
		t.Errorf("savepointd wrote to the stderr it was started with:\n%s", stderr)
	}
}

// TestLogFileRefused: a --log-file that cannot be opened is a
// configuration error, said on stderr.
func TestLogFileRefused(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr strings.Builder
	code := run([]string{"--data-dir", filepath.Join(dir, "data"), "--listen", "unix:" + filepath.Join(dir, "s.sock"), "--log-file", dir},
		func(string) string { return "" }, &stdout, &stderr)
	if code != exitConfig || !strings.Contains(stderr.String(), "--log-file") {
		t.Errorf("run with a directory as --log-file = %d, stderr %q; want exit %d naming --log-file", code, stderr.String(), exitConfig)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
