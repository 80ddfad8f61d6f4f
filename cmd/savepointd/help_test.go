package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/internal/version"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the commands' output")

// checkGolden compares got with testdata/NAME.golden (go test -update
// rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestHelp: --help lists the commands and serving's flags; each command's
// -h shows its synopsis, what it does, an example and only its own flags.
// The help goes to stdout, with exit 0.
func TestHelp(t *testing.T) {
	cases := [][]string{{"--help"}}
	for _, s := range subcommands {
		cases = append(cases, []string{s.name, "-h"})
	}
	for _, args := range cases {
		name := "help"
		if len(args) > 1 {
			name = "help-" + args[0]
		}
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, envOf(nil), &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
				t.Fatalf("%q: exit %d, stderr %q", args, code, stderr.String())
			}
			out := strings.ReplaceAll(stdout.String(), daemon.DefaultConfig().Listen, "DEFAULT_LISTEN")
			checkGolden(t, name, out)
			if len(args) == 1 {
				for _, s := range subcommands {
					if !strings.Contains(out, "\n  "+s.name+" ") {
						t.Errorf("--help does not list %s", s.name)
					}
				}
				return
			}
			s := lookupSubcommand(args[0])
			if !strings.Contains(out, "Example:\n  savepointd "+s.name) {
				t.Errorf("%s -h has no example", s.name)
			}
			if s.flags != nil && strings.Contains(out, "-listen") {
				t.Errorf("%s -h lists serving's flags", s.name)
			}
		})
	}
}

// TestVersionCommand: "savepointd version" prints what --version prints.
func TestVersionCommand(t *testing.T) {
	var a, b bytes.Buffer
	if code := run([]string{"version"}, envOf(nil), &a, os.Stderr); code != exitOK {
		t.Fatalf("version: exit %d", code)
	}
	run([]string{"--version"}, envOf(nil), &b, os.Stderr)
	if a.String() != "savepointd "+version.String()+"\n" || a.String() != b.String() {
		t.Errorf("version printed %q, --version %q", a.String(), b.String())
	}
}
