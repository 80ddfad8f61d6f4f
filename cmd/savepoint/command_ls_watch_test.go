package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestLsWatch: ls --watch prints the table, then a line for a new session
// within 2 s of its save and one for a deleted session, keeps going past
// --timeout (which bounds each RPC), and stops with exit 0 on an interrupt.
func TestLsWatch(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb daemontest.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"ls", "--watch", "--status", "active", "--addr", "unix:" + d.Socket, "--timeout", "300ms"}, &out, &errb)
	}()
	waitFor := func(want string, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); !strings.Contains(out.String(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q within %v: stdout %q, stderr %q", want, within, out.String(), errb.String())
			}
		}
	}
	waitFor("notes-2", 10*time.Second)
	if !strings.HasPrefix(out.String(), "SESSION ") {
		t.Errorf("ls --watch does not start with the table: %q", out.String())
	}
	time.Sleep(600 * time.Millisecond) // past --timeout
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "watched-9", Task: "t",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"hi"`}}}); err != nil {
		t.Fatal(err)
	}
	waitFor("CHANGED  watched-9 status=active turn=0 revision=1 pending=0 in_doubt=0 resolved=0/0 awaiting=0 updated=", 2*time.Second)
	if _, err := d.Client.DeleteSession(t.Context(), &savepointv1.DeleteSessionRequest{SessionId: "watched-9"}); err != nil {
		t.Fatal(err)
	}
	waitFor("REMOVED  watched-9\n", 2*time.Second)
	cancel()
	if c := <-code; c != exitOK {
		t.Errorf("interrupted ls --watch exited %d: %s", c, errb.String())
	}
}
