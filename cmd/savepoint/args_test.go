package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestFlagsAnywhere runs every command with its flags before its arguments
// and again after them, and expects the same exit code and output. The
// writes are given a stale --epoch, so that they reach the daemon and are
// refused without changing what the next case sees.
func TestFlagsAnywhere(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	addr := "unix:" + d.Socket
	tested := map[string]bool{"help": true}
	for _, tc := range []struct {
		name  string
		args  []string // the positional arguments
		flags []string
		code  int
	}{
		{"ls", nil, []string{"--label", "team=infra", "--pending"}, exitOK},
		{"show", []string{"report-1"}, []string{"--revision", "1"}, exitOK},
		{"export", []string{"report-1"}, []string{"--revision", "1"}, exitOK},
		{"effects", []string{"report-1"}, []string{"--timeout", "20s"}, exitOK},
		{"info", nil, []string{"--timeout", "20s"}, exitOK},
		{"verify", nil, []string{"--timeout", "20s"}, exitOK},
		{"backup", nil, []string{"--since", "1"}, exitOK},
		{"fork", []string{"report-1", "notes-2"}, []string{"--revision", "1"}, exitFail},
		{"rewind", []string{"report-1"}, []string{"--revision", "1", "--epoch", "3"}, exitFenced},
		{"complete", []string{"notes-2"}, []string{"--epoch", "7", "--output", "done"}, exitFenced},
		{"rm", []string{"notes-2"}, []string{"--epoch", "7"}, exitFenced},
		{"resolve", []string{"report-1", "toolu_03"}, []string{"--done", "--by", "alice"}, exitFail},
		{"approve", []string{"report-1", "toolu_01"}, []string{"--by", "alice"}, exitFail},
		{"version", nil, []string{"--timeout", "20s"}, exitOK},
		{"ui", nil, []string{"--listen", "0.0.0.0:0", "--read-only"}, exitUsage},
	} {
		tested[tc.name] = true
		first := runCLI(t, slices.Concat([]string{"--addr", addr, tc.name}, tc.flags, tc.args)...)
		last := runCLI(t, slices.Concat([]string{tc.name}, tc.args, tc.flags, []string{"--addr", addr})...)
		if first.code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.name, first.code, tc.code, first.stderr)
		}
		if tc.name == "backup" { // the progress line's size may differ
			first.stderr, last.stderr = "", ""
		}
		if first != last {
			t.Errorf("%s: flags last: %+v\nflags first: %+v", tc.name, last, first)
		}
	}
	for _, c := range commands {
		if !tested[c.name] {
			t.Errorf("command %s is not tested here", c.name)
		}
	}
	if t.Failed() {
		return
	}
	// The writes changed nothing.
	if r := runCLI(t, "--addr", addr, "ls"); r.code != exitOK || !strings.Contains(r.stdout, "notes-2") {
		t.Errorf("ls after the refused writes: %+v", r)
	}
}
