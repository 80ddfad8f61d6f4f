package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestRestoreFiles restores an encrypted full backup file and an
// incremental, in order, one from a file and one from stdin, and refuses
// them in the wrong order or without the key.
func TestRestoreFiles(t *testing.T) {
	bin := daemontest.Binary(t)
	ctx := context.Background()
	key := bytes.Repeat([]byte{4}, 32)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := badgerstore.Open(t.TempDir(), badgerstore.Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	backup := func(name string, since uint64) (string, uint64) {
		path := filepath.Join(files, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		res, err := src.BackupSince(ctx, f, since, false)
		if err != nil || !res.Encrypted {
			t.Fatalf("backup %s: %+v %v", name, res, err)
		}
		return path, res.Next
	}
	if _, err := src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "first", Task: "a"}); err != nil {
		t.Fatal(err)
	}
	full, next := backup("full", 0)
	if _, err := src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "second", Task: "b"}); err != nil {
		t.Fatal(err)
	}
	inc, _ := backup("inc", next)
	src.Close()

	restore := func(dir string, stdin string, args ...string) (int, string) {
		cmd := exec.Command(bin, append(append([]string{"restore"}, args...), "--data-dir", dir, "--encryption-key-file", keyFile)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if stdin != "" {
			f, err := os.Open(stdin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
		}
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String() + stderr.String()
	}
	if code, out := restore(t.TempDir(), "", inc, full); code != exitFail || !strings.Contains(out, "restore the full backup first") {
		t.Errorf("incremental first: exit %d: %s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if code, out := restore(dir, inc, full, "-"); code != exitOK || !strings.Contains(out, "from 2 files") {
		t.Fatalf("full, then the incremental on stdin: exit %d: %s", code, out)
	}
	st, err := badgerstore.Open(dir, badgerstore.Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sums, err := st.ListSessions(ctx, "", 10, core.SessionFilter{})
	if err != nil || len(sums) != 2 || sums[0].SessionID != "first" || sums[1].SessionID != "second" {
		t.Fatalf("restored %+v %v", sums, err)
	}
}

// TestRestoreProgress: restore reports how much of each file it has read,
// at most once per interval, so a long restore shows it is moving.
func TestRestoreProgress(t *testing.T) {
	var out bytes.Buffer
	p := &progressReader{r: strings.NewReader(strings.Repeat("x", 3<<20)), w: &out, name: "full.bak", every: 0}
	buf := make([]byte, 1<<20)
	for {
		if _, err := p.Read(buf); err != nil {
			break
		}
	}
	if !strings.Contains(out.String(), "savepointd restore: full.bak: 3.0 MiB read") {
		t.Errorf("progress lines:\n%s", out.String())
	}
	out.Reset()
	p = &progressReader{r: strings.NewReader(strings.Repeat("x", 3<<20)), w: &out, name: "full.bak", every: time.Hour}
	p.shown = time.Now()
	for {
		if _, err := p.Read(buf); err != nil {
			break
		}
	}
	if out.Len() != 0 {
		t.Errorf("a line within the interval: %q", out.String())
	}
}
