package main

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/internal/version"
)

// TestVersion: --version and the version command print the same line, and
// need no daemon.
func TestVersion(t *testing.T) {
	want := "savepoint " + version.String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}, {"--addr", "unix:/nonexistent/s.sock", "version"}} {
		if r := runCLI(t, args...); r.code != exitOK || r.stdout != want || r.stderr != "" {
			t.Errorf("%q: %+v, want %q", args, r, want)
		}
	}
	if r := runCLI(t, "version", "x"); r.code != exitUsage {
		t.Errorf("version x: %+v, want exit %d", r, exitUsage)
	}
}

// TestCommandHelp: every command's -h, as savepoint help COMMAND, shows its
// synopsis, an example of it and its own flags; savepoint --help lists every
// command.
func TestCommandHelp(t *testing.T) {
	top := runCLI(t, "--help")
	for _, c := range commands {
		if !strings.Contains(top.stdout, "\n  "+c.name+" ") {
			t.Errorf("savepoint --help does not list %s", c.name)
		}
		h := runCLI(t, c.name, "-h")
		if h.code != exitOK || h.stdout != runCLI(t, "help", c.name).stdout {
			t.Errorf("%s -h: %+v, unlike savepoint help %s", c.name, h, c.name)
		}
		if !strings.HasPrefix(h.stdout, "Usage: savepoint "+c.name) || !strings.Contains(h.stdout, "\nExample:\n  savepoint "+c.name) ||
			!strings.Contains(h.stdout, "\nFlags:\n") {
			t.Errorf("%s -h lacks its synopsis, example or flags:\n%s", c.name, h.stdout)
		}
	}
}
