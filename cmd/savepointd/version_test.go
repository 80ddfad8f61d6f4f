package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/internal/version"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func TestVersionFlag(t *testing.T) {
	for _, env := range []map[string]string{nil, {"SAVEPOINT_MAX_STATE_BYTES": "lots"}} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"--version"}, envOf(env), &stdout, &stderr); code != exitOK {
			t.Fatalf("--version with env %v: exit %d; stderr:\n%s", env, code, stderr.String())
		}
		if got, want := stdout.String(), "savepointd "+version.String()+"\n"; got != want {
			t.Errorf("--version with env %v printed %q, want %q", env, got, want)
		}
	}
}

// TestLinkTimeVersion builds savepointd as `make build VERSION=...` does and
// checks that --version and GetServerInfo both report the version given.
func TestLinkTimeVersion(t *testing.T) {
	const v = "v0.0.0-linktest.1"
	bin := filepath.Join(t.TempDir(), "savepointd")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/savepoint-dev/savepoint/internal/version.version="+v, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || string(out) != "savepointd "+v+"\n" {
		t.Errorf("%s --version: %q, %v; want %q", bin, out, err, "savepointd "+v+"\n")
	}
	d := daemontest.StartBinary(t, bin)
	info, err := d.Client.GetServerInfo(context.Background(), &savepointv1.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetVersion() != v {
		t.Errorf("GetServerInfo version %q, want %q", info.GetVersion(), v)
	}
	if strings.Contains(d.Stderr(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", d.Stderr())
	}
}

// TestMakeBuildVersion builds savepointd and savepoint with `make build`,
// no VERSION given and Go's VCS stamping off (GOFLAGS=-buildvcs=false): in
// this checkout both report `git describe --tags --always --dirty`; in a copy
// of the tree outside any git checkout both say so, and so does the build.
//
// Both builds use -trimpath and CGO_ENABLED=0, as tools/dist's release
// build does: the compiler's cache then ignores where the sources are, so
// the copy's build reuses the checkout's packages (and both reuse those of
// tools/dist's TestReproducible and make dist) instead of compiling the
// whole tree again under a new directory. The version is stamped at link
// time, which neither flag touches.
func TestMakeBuildVersion(t *testing.T) {
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	build := func(dir string, env ...string) (versions []string, stderr string) {
		t.Helper()
		out := t.TempDir()
		cmd := exec.Command("make", "-C", dir, "build", "BIN="+out, "CMDS=cmd/savepointd cmd/savepoint")
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-buildvcs=false -trimpath", "CGO_ENABLED=0", "VERSION="}, env...)...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("make build in %s: %v\n%s", dir, err, errb.String())
		}
		for _, bin := range []string{"savepointd", "savepoint"} {
			v, err := exec.Command(filepath.Join(out, bin), "--version").Output()
			if err != nil {
				t.Fatalf("%s --version: %v", bin, err)
			}
			versions = append(versions, string(v))
		}
		return versions, errb.String()
	}

	describe, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	want := strings.TrimSpace(string(describe))
	got, _ := build(root)
	if got[0] != "savepointd "+want+"\n" || got[1] != "savepoint "+want+"\n" {
		t.Errorf("in the checkout: %q, want both to report %q", got, want)
	}

	// The Go sources and build files of the working tree, untracked ones too,
	// with everything under cmd/ (the files binaries embed), copied where no
	// git repository encloses them.
	copyDir := t.TempDir()
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "Makefile", "mk", "go.mod", "go.sum", "*.go", "cmd").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) { // deleted in the working tree
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(copyDir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, stderr := build(copyDir, "GIT_CEILING_DIRECTORIES="+filepath.Dir(copyDir))
	const noGit = "unknown (not built from a git checkout)"
	if got[0] != "savepointd "+noGit+"\n" || got[1] != "savepoint "+noGit+"\n" || !strings.Contains(stderr, "build: not a git checkout") {
		t.Errorf("outside a git checkout: %q, make's stderr %q; want both to report %q and the build to say so", got, stderr, noGit)
	}
}
