package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listenNotify listens on a fake systemd notification socket, points
// NOTIFY_SOCKET at it for the rest of the test, and returns its path and the
// assignments it receives, in order. (tests/daemontest.StartNotify is the
// full helper of the end-to-end tests, which this package does not import.)
func listenNotify(t *testing.T) (string, <-chan string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sp") // short: sun_path holds ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); os.RemoveAll(dir) })
	c := make(chan string, 4096)
	go func() {
		defer close(c)
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			for _, a := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				c <- a
			}
		}
	}()
	t.Setenv("NOTIFY_SOCKET", path)
	return path, c
}

// TestNotifyStarting checks that the start timeout is extended while the
// store opens, and no longer once the open has returned.
func TestNotifyStarting(t *testing.T) {
	path, c := listenNotify(t)
	old := extendPeriod
	extendPeriod = 50 * time.Millisecond
	defer func() { extendPeriod = old }()
	stop := NotifyStarting(nil)
	time.Sleep(300 * time.Millisecond)
	stop()
	// What was sent before stop returned is queued before this marker.
	mc, err := net.Dial("unixgram", path)
	if err != nil {
		t.Fatal(err)
	}
	mc.Write([]byte("MARKER=1"))
	mc.Close()
	var got []string
	deadline := time.After(5 * time.Second)
	for marker := false; !marker; {
		select {
		case a := <-c:
			marker = a == "MARKER=1"
			if !marker {
				got = append(got, a)
			}
		case <-deadline:
			t.Fatalf("no MARKER=1 within 5s; received %q", got)
		}
	}
	extends := 0
	for _, a := range got {
		if v, ok := strings.CutPrefix(a, "EXTEND_TIMEOUT_USEC="); ok {
			extends++
			if v != "150000" {
				t.Errorf("%s, want three periods: EXTEND_TIMEOUT_USEC=150000", a)
			}
		}
	}
	if extends < 3 {
		t.Errorf("%d extensions in 300ms every 50ms: %q", extends, got)
	}
	select {
	case a := <-c:
		t.Errorf("notification after stop: %q", a)
	case <-time.After(200 * time.Millisecond):
	}
}
