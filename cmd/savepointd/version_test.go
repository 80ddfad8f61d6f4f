package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestVersionFlag(t *testing.T) {
	for _, env := range []map[string]string{nil, {"SAVEPOINT_MAX_STATE_BYTES": "lots"}} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"--version"}, envOf(env), &stdout, &stderr); code != exitOK {
			t.Fatalf("--version with env %v: exit %d; stderr:\n%s", env, code, stderr.String())
		}
		if got, want := stdout.String(), "savepointd "+daemon.Version()+"\n"; got != want {
			t.Errorf("--version with env %v printed %q, want %q", env, got, want)
		}
	}
}

// TestLinkTimeVersion builds savepointd as `make build VERSION=...` does and
// checks that --version and GetServerInfo both report the version given.
func TestLinkTimeVersion(t *testing.T) {
	const v = "v0.0.0-linktest.1"
	bin := filepath.Join(t.TempDir(), "savepointd")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/savepoint-dev/savepoint/daemon.version="+v, ".")
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
