package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeCommands runs the README's savepoint-demo commands ("From Go")
// as a new user would type them, against a real savepointd: the fresh run
// and the resumed run finish (exit 0), the killed run exits 137, both
// sessions end completed, and the killed session's report is written once.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	_, block, _ := strings.Cut(string(readme), "`cmd/savepoint-demo` is the seed's task")
	_, block, _ = strings.Cut(block, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if strings.Contains(line, "bin/savepoint-demo") {
			cmds = append(cmds, line)
		}
	}
	if len(cmds) != 3 {
		t.Fatalf("the README's demo block has %d savepoint-demo commands, want 3:\n%s", len(cmds), block)
	}
	_, addr := startDaemon(t)
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(demoBinary(t), filepath.Join(bin, "savepoint-demo")); err != nil {
		t.Fatal(err)
	}
	demoDir := filepath.Join(work, "demo")
	for i, want := range []int{0, 137, 0} {
		line := strings.ReplaceAll(cmds[i], "unix:$PWD/data/savepoint.sock", addr)
		line = strings.ReplaceAll(line, "/tmp/demo", demoDir)
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("%s: exit %d, want %d:\n%s", cmds[i], code, want, out)
		}
	}
	for _, id := range []string{"demo-1", "demo-2"} {
		checkCompleted(t, addr, id)
	}
	// A fresh run starts the work directory's report over, so what is left
	// is demo-2's: written once across its kill and resume.
	if n := writes(t, demoDir); n != 1 {
		t.Errorf("demo-2's report written %d times across its kill and resume, want 1", n)
	}
	if report, err := os.ReadFile(filepath.Join(demoDir, reportFile)); err != nil || string(report) != reportText {
		t.Errorf("report.txt: %q, %v", report, err)
	}
}
