package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestCommandsTakeFlagsAnywhere runs each command of savepointd with its
// flags before its arguments and again after them, as the docs write them
// (`savepointd restore --data-dir DIR full.bak inc.bak`).
func TestCommandsTakeFlagsAnywhere(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	st, err := badgerstore.Open(src, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "first", Task: "a"}); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	full, inc := filepath.Join(files, "full.bak"), filepath.Join(files, "inc.bak")
	write := func(path string, since uint64) uint64 {
		var b bytes.Buffer
		res, err := st.BackupSince(ctx, &b, since, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return res.Next
	}
	next := write(full, 0)
	if _, err := st.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "second", Task: "b"}); err != nil {
		t.Fatal(err)
	}
	write(inc, next)
	st.Close()

	bin := daemontest.Binary(t) // a store-opening command must exit after it: ExitAfterClose
	savepointd := func(stdin string, args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if stdin != "" {
			f, err := os.Open(stdin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
		}
		cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}
	tested := map[string]bool{}
	newDir := func() string { return filepath.Join(t.TempDir(), "new") }
	for _, tc := range []struct {
		name  string
		args  func() []string // the positional arguments
		flags func() []string
		code  int
		says  string // in stdout and stderr
	}{
		{"restore", func() []string { return []string{full, inc} }, func() []string { return []string{"--data-dir", newDir()} }, exitOK, "from 2 files"},
		{"backup", func() []string { return []string{filepath.Join(t.TempDir(), "b")} }, func() []string { return []string{"--data-dir", src} }, exitOK, "wrote backup"},
		{"verify", nil, func() []string { return []string{"--data-dir", src, "--log-level", "warn"} }, exitOK, `"checkedSessions"`},
		{"repair-manifest", nil, func() []string { return []string{"--data-dir", src, "--log-level", "warn"} }, exitOK, "nothing to repair"},
		{"verify", func() []string { return []string{"extra"} }, func() []string { return []string{"--data-dir", src} }, exitConfig, `unexpected arguments ["extra"]: verify takes none`},
		{"migrate-store", func() []string { return []string{"extra"} }, func() []string { return []string{"--data-dir", src, "--to", "postgres://h/db"} }, exitConfig, `unexpected arguments ["extra"]: migrate-store takes none`},
		{"version", nil, func() []string { return []string{"--help"} }, exitOK, "Usage: savepointd version"},
	} {
		tested[tc.name] = true
		for _, order := range []string{"flags first", "flags last"} {
			var args, flags []string
			if tc.args != nil {
				args = tc.args()
			}
			flags = tc.flags()
			cmd := slices.Concat([]string{tc.name}, flags, args)
			if order == "flags last" {
				cmd = slices.Concat([]string{tc.name}, args, flags)
			}
			code, out := savepointd("", cmd...)
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Errorf("%s, %s: %q: exit %d (want %d), output does not say %q:\n%s", tc.name, order, cmd, code, tc.code, tc.says, out)
			}
		}
	}
	for _, s := range subcommands {
		if !tested[s.name] {
			t.Errorf("command %s is not tested here", s.name)
		}
	}
	// A "-" is stdin, among the files as anywhere.
	if code, out := savepointd(inc, "restore", full, "-", "--data-dir", newDir()); code != exitOK || !strings.Contains(out, "from 2 files") {
		t.Errorf("restore FULL - --data-dir D, INC on stdin: exit %d:\n%s", code, out)
	}
}
