package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

const (
	readme      = "../../README.md"
	walkthrough = "../../docs/walkthrough.md"
	// walkthroughTitle and readmeCLI are the sections whose commands the
	// tests run: the whole walk-through page, and the README's CLI section.
	walkthroughTitle = "# Walk-through: one cycle, a kill, a resume"
	readmeCLI        = "## savepoint CLI"
)

// TestWalkthrough runs docs/walkthrough.md as a new user would,
// against a savepointd of this tree that is killed with SIGKILL and started
// again at step 5, and checks every command's exit status and the output the
// page shows for it, times and idempotency keys aside, so that the page
// cannot drift from what the daemon prints (go test -update rewrites its
// outputs). `make test-cli` installs grpcurl and runs it.
func TestWalkthrough(t *testing.T) {
	tools := docToolDir(t)
	work := t.TempDir()
	if err := os.Symlink(tools, filepath.Join(work, "bin")); err != nil { // the page runs bin/grpcurl
		t.Fatal(err)
	}
	cmds := docCommands(t, walkthrough, walkthroughTitle)
	if len(cmds) < 9 {
		t.Fatalf("%s has %d commands; the test expects its nine steps", walkthrough, len(cmds))
	}
	d := daemontest.Start(t)
	killed := false
	env := []string{"SOCK=" + d.Socket, "SVC=savepoint.v1.SavepointService"}
	checkDocCommands(t, walkthrough, cmds, work, d.Socket, env, func(c docCommand) {
		if !killed && strings.Contains(c.text, "/Resume") { // step 5: the kill
			d.Kill()
			d.Restart()
			killed = true
		}
	})
	if !killed {
		t.Errorf("%s has no Resume: the test never killed the daemon", walkthrough)
	}
}

// TestReadmeCLI runs the savepoint commands of the README's "savepoint CLI"
// section, in order, against a daemon holding the sessions they name, and
// checks that each one succeeds.
func TestReadmeCLI(t *testing.T) {
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	linkSavepoint(t, bin)
	cmds := docCommands(t, readme, readmeCLI)
	if len(cmds) < 5 {
		t.Fatalf("%s's %q has %d savepoint commands", readme, readmeCLI, len(cmds))
	}
	d := daemontest.StartInProcess(t, daemon.Config{})
	seedDoc(t, d.Client)
	checkDocCommands(t, readme, cmds, work, d.Socket, []string{"SAVEPOINT_ADDR=unix:" + d.Socket}, nil)
}
