package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestBackupCommand backs the daemon up through savepoint backup, full and
// incremental, and restores both files into a new store.
func TestBackupCommand(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	addr := "unix:" + d.Socket

	r := runCLI(t, "--addr", addr, "backup", "--require-encrypted")
	if r.code != exitFail || r.stdout != "" || !strings.Contains(r.stderr, "--require-encrypted refuses its plaintext backup") ||
		!strings.HasSuffix(r.stderr, "(PLAINTEXT_BACKUP)\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("backup --require-encrypted of a store without a key: exit %d, %d bytes out, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	full := runCLI(t, "--addr", addr, "backup")
	m := regexp.MustCompile(`^backup: the store has no encryption key, so this backup is plaintext: .*docs/security.md.*\n` +
		`backup: .+, plaintext; next incremental: savepoint backup --since (\d+)\n$`).FindStringSubmatch(full.stderr)
	if full.code != exitOK || m == nil || len(full.stdout) == 0 {
		t.Fatalf("backup: exit %d, %d bytes, stderr %q", full.code, len(full.stdout), full.stderr)
	}
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "after-backup"}); err != nil {
		t.Fatal(err)
	}
	inc := runCLI(t, "--addr", addr, "backup", "--since", m[1])
	if inc.code != exitOK || len(inc.stdout) == 0 || len(inc.stdout) >= len(full.stdout) {
		t.Fatalf("incremental: exit %d, %d bytes (full %d), stderr %q", inc.code, len(inc.stdout), len(full.stdout), inc.stderr)
	}

	s, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range []string{full.stdout, inc.stdout} {
		if _, err := s.Restore(bytes.NewReader([]byte(f))); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := s.ListSessions(t.Context(), "", 10, core.SessionFilter{})
	if err != nil || len(sums) != 4 || sums[0].SessionID != "after-backup" || sums[3].SessionID != "report-1" || sums[3].PendingToolUseCount != 6 || sums[2].AwaitingApproval != 2 {
		t.Fatalf("restored: %+v %v", sums, err)
	}
}

// TestBackupToFile: backup -o FILE writes FILE only when the backup is
// complete: a refused backup leaves neither FILE nor a temporary file, and
// an existing FILE is never overwritten.
func TestBackupToFile(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	addr := "unix:" + d.Socket
	dir := t.TempDir()
	file := filepath.Join(dir, "full.bak")

	r := runCLI(t, "--addr", addr, "backup", "--require-encrypted", "-o", file)
	if r.code != exitFail {
		t.Fatalf("refused backup: exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused backup left %v", entries)
	}

	r = runCLI(t, "--addr", addr, "backup", "-o", file)
	if r.code != exitOK || r.stdout != "" || !strings.Contains(r.stderr, "plaintext; next incremental") {
		t.Fatalf("backup -o: %+v", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("backup -o left %v, want only %s", entries, file)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", file, fi, err)
	}
	data, _ := os.ReadFile(file)
	s, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("restore %s: %v", file, err)
	}

	r = runCLI(t, "--addr", addr, "backup", "-o", file)
	if again, _ := os.ReadFile(file); r.code != exitFail || !strings.Contains(r.stderr, "never overwrites") || !bytes.Equal(again, data) {
		t.Fatalf("backup -o over an existing file: %+v", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a refused backup left %v", entries)
	}
}

// TestBackupOfEncryptedStore: the backup of a store with a key is
// encrypted, said so, and passes --require-encrypted.
func TestBackupOfEncryptedStore(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, "--encryption-key-file", key)
	seed(t, d.Client)
	file := filepath.Join(t.TempDir(), "full.bak")
	r := runCLI(t, "--addr", "unix:"+d.Socket, "backup", "--require-encrypted", "-o", file)
	if r.code != exitOK || !regexp.MustCompile(`^backup: .+, encrypted with the store's key; next incremental: savepoint backup --since \d+\n$`).MatchString(r.stderr) {
		t.Fatalf("backup --require-encrypted of an encrypted store: %+v", r)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("%s: %v %v", file, fi, err)
	}
}
