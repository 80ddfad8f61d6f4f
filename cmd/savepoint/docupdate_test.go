package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func TestUpdatedOutput(t *testing.T) {
	const (
		k1 = "6dbd61b94f6d4b53c7c287c1323a0b5f"
		k2 = "54ceb30d3cfb759efef08407e138fcbe"
		t1 = "2026-12-07T18:16:13Z"
		t2 = "2026-12-07T20:50:54Z"
	)
	tests := []struct {
		name, old, got, want string
	}{
		{"only times and keys differ: unchanged", "key " + k1 + "\nat " + t1 + "\nsame", "key " + k2 + "\nat " + t2 + "\nsame", "key " + k1 + "\nat " + t1 + "\nsame"},
		{"run-specific fields: unchanged", `"pid": 13590` + "\n" + `"uptime": "0.47s"`, `"pid": 20459` + "\n" + `"uptime": "0.31s"`, `"pid": 13590` + "\n" + `"uptime": "0.47s"`},
		{"a changed line: only it is new", "key " + k1 + "\nturn 1 at " + t1 + "\nend", "key " + k2 + "\nturn 2 at " + t2 + "\nend", "key " + k1 + "\nturn 2 at " + t2 + "\nend"},
		{"an inserted line", "a " + t1 + "\nc " + t1, "a " + t2 + "\nb " + t2 + "\nc " + t2, "a " + t1 + "\nb " + t2 + "\nc " + t1},
		{"a removed line", "a " + t1 + "\nb " + t1 + "\nc " + t1, "a " + t2 + "\nc " + t2, "a " + t1 + "\nc " + t1},
		{"from nothing", "", "a " + t2, "a " + t2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := updatedOutput(tt.old, tt.got, "/tmp/s.sock"); got != tt.want {
				t.Errorf("updatedOutput(%q, %q) = %q, want %q", tt.old, tt.got, got, tt.want)
			}
		})
	}
}

// errRecorder is a testing.TB whose Errorf is recorded, not reported.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestDocUpdateStable runs a doc's commands with -update against two
// daemons in turn, whose outputs differ only in times and idempotency keys:
// the second update leaves the doc byte for byte as the first wrote it.
// A documented output that really differs from what the command prints
// still fails the check, and -update rewrites only that line.
func TestDocUpdateStable(t *testing.T) {
	bin := t.TempDir()
	linkSavepoint(t, bin)
	doc := filepath.Join(t.TempDir(), "doc.md")
	const text = "# Doc\n\n## Inspecting\n\n```sh\nsavepoint ls\n```\n```\n```\n\n```sh\nsavepoint show report-1\n```\n```\n```\n"
	if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(tb testing.TB, upd bool) {
		t.Helper()
		old := *update
		*update = upd
		defer func() { *update = old }()
		d := daemontest.StartInProcess(t, daemon.Config{})
		seedDoc(t, d.Client)
		env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "SAVEPOINT_ADDR=unix:" + d.Socket}
		checkDocCommands(tb, doc, docCommands(t, doc, "## Inspecting"), t.TempDir(), d.Socket, env, nil)
	}
	check(t, true)
	first := readDoc(t, doc)
	if !strings.Contains(first, "wrote report.md (41 lines)") || !keyRE.MatchString(first) {
		t.Fatalf("the first update wrote no show output with a key:\n%s", first)
	}
	check(t, true)
	if second := readDoc(t, doc); second != first {
		t.Fatalf("a second -update changed the doc:\n--- first\n%s\n--- second\n%s", first, second)
	}
	check(t, false)

	// The doc says something the command does not print.
	changed := strings.Replace(first, "wrote report.md (41 lines)", "wrote report.md (40 lines)", 1)
	if err := os.WriteFile(doc, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &errRecorder{TB: t}
	check(r, false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "savepoint show report-1") {
		t.Fatalf("a wrong documented output gave errors %q, want one naming savepoint show", r.errs)
	}
	check(t, true)
	if got := readDoc(t, doc); got != first {
		t.Errorf("-update of the changed line did not restore the doc to the first update's:\n--- got\n%s\n--- want\n%s", got, first)
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
