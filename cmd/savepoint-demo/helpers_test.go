package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// These tests run the real savepoint-demo binary against the real savepointd
// binary, each as its own process, so a simulated kill is a real exit.

// demoBinary builds cmd/savepoint-demo once per test process.
func demoBinary(t testing.TB) string {
	t.Helper()
	return daemontest.Build(t, "github.com/savepoint-dev/savepoint/cmd/savepoint-demo")
}

// workdir returns a fresh work directory holding the sample notes.
func workdir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, notesFile), []byte(sampleNotes), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runOpts is one run of the demo.
type runOpts struct {
	addr, dir, session, script string
	resume                     bool
	crash                      string // CRASH_AFTER
}

type runResult struct {
	code           int
	stdout, stderr string
}

func (r runResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%sstderr:\n%s", r.code, r.stdout, r.stderr)
}

func runDemo(t testing.TB, o runOpts) runResult {
	t.Helper()
	args := []string{"--addr", o.addr, "--workdir", o.dir, "--session", o.session, "--script", o.script}
	if o.resume {
		args = append(args, "--resume")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBinary(t), args...)
	cmd.Env = append(os.Environ(), "CRASH_AFTER="+o.crash, "PAUSE_AFTER=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("savepoint-demo %v: %v", args, err)
	}
	return r
}

// history reads a session's latest revision and its whole message list
// back from the daemon, without taking ownership.
func history(t testing.TB, c savepointv1.SavepointServiceClient, id string) (*savepointv1.Checkpoint, []*savepointv1.Message) {
	t.Helper()
	ctx := context.Background()
	g, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetSession %s: %v", id, err)
	}
	cp := g.GetCheckpoint()
	msgs := cp.GetMessages()
	for token := g.GetNextPageToken(); token != ""; {
		p, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: id, Revision: cp.GetRevision(), PageToken: token})
		if err != nil {
			t.Fatalf("ListMessages %s: %v", id, err)
		}
		msgs = append(msgs, p.GetMessages()...)
		token = p.GetNextPageToken()
	}
	if uint64(len(msgs)) != cp.GetMessageCount() {
		t.Fatalf("session %s: read %d messages, revision %d has %d", id, len(msgs), cp.GetRevision(), cp.GetMessageCount())
	}
	return cp, msgs
}

// canon is a message as canonical JSON: the content parsed and printed
// again with sorted keys and no insignificant space.
func canon(t testing.TB, m *savepointv1.Message) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(m.GetContentJson()), &v); err != nil {
		t.Fatalf("message content %q: %v", m.GetContentJson(), err)
	}
	b, err := json.Marshal(map[string]any{"role": m.GetRole(), "content": v})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writes(t testing.TB, dir string) int {
	t.Helper()
	n, err := countWrites(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var reconcileLine = regexp.MustCompile(`^\[resume\]\[reconcile\] tool_use_id=(\S+) name=(\S+) (.*)$`)

// decisions returns what a resumed run printed about its pending tool uses,
// short: "write_report=REUSE", "read_notes=RUN(read-only)",
// "write_report=RUN(never begun)", "write_report=IN_DOUBT", or "nothing
// pending".
func decisions(stdout string) []string {
	var out []string
	for line := range strings.Lines(stdout) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "[resume] read ") && strings.HasSuffix(line, " pending=none") {
			out = append(out, "nothing pending")
		}
		m := reconcileLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d := "?" + m[3]
		switch text := m[3]; {
		case strings.HasPrefix(text, "ledger hit, reusing result, not re-running"):
			d = "REUSE"
		case strings.HasPrefix(text, "ledger miss, read-only tool, re-running"):
			d = "RUN(read-only)"
		case strings.Contains(text, "never started"):
			d = "RUN(never begun)"
		case strings.Contains(text, "in doubt") && strings.HasSuffix(text, "appending is_error"):
			d = "IN_DOUBT"
		}
		out = append(out, m[2]+"="+d)
	}
	return out
}

// startDaemon starts the real savepointd and returns it with its address.
func startDaemon(t testing.TB) (*daemontest.Daemon, string) {
	t.Helper()
	d := daemontest.Start(t)
	return d, "unix:" + d.Socket
}
