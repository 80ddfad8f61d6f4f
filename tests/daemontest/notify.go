package daemontest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Notify is a fake systemd notification socket: a unixgram socket in a
// directory of t.TempDir(). StartNotify points NOTIFY_SOCKET at it for the
// test process; pass Env to a child. Every assignment ("READY=1") of every
// datagram received is queued on C, in order, until cleanup.
type Notify struct {
	Path string
	Env  string // "NOTIFY_SOCKET=" + Path
	C    <-chan string
}

// StartNotify listens on a fresh notification socket and sets NOTIFY_SOCKET
// to it for the rest of the test.
func StartNotify(t *testing.T) *Notify {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	if len(path) > 100 { // sun_path: fall back to a short directory
		path = filepath.Join(filepath.Dir(SocketPath(t)), "notify")
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
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
	t.Cleanup(func() { conn.Close(); os.Remove(path) })
	t.Setenv("NOTIFY_SOCKET", path)
	return &Notify{Path: path, Env: "NOTIFY_SOCKET=" + path, C: c}
}

// Wait returns the assignments received before the first one that starts
// with prefix, failing the test if none arrives within timeout.
func (n *Notify) Wait(t testing.TB, prefix string, timeout time.Duration) []string {
	t.Helper()
	var before []string
	deadline := time.After(timeout)
	for {
		select {
		case a, ok := <-n.C:
			if !ok {
				t.Fatalf("notification socket closed waiting for %s; received %q", prefix, before)
			}
			if strings.HasPrefix(a, prefix) {
				return before
			}
			before = append(before, a)
		case <-deadline:
			t.Fatalf("no %s notification within %v; received %q", prefix, timeout, before)
		}
	}
}

// Drain returns what is received during d.
func (n *Notify) Drain(d time.Duration) []string {
	var got []string
	deadline := time.After(d)
	for {
		select {
		case a, ok := <-n.C:
			if !ok {
				return got
			}
			got = append(got, a)
		case <-deadline:
			return got
		}
	}
}
