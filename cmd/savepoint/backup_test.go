package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestBackupCommand backs the daemon up through savepoint backup, full and
// incremental, and restores both files into a new store.
func TestBackupCommand(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	addr := "unix:" + d.Socket

	r := runCLI(t, "--addr", addr, "backup")
	if r.code != exitFail || r.stdout != "" || !strings.Contains(r.stderr, "(PLAINTEXT_BACKUP)") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("backup of a store without a key, no --plaintext: exit %d, %d bytes out, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	full := runCLI(t, "--addr", addr, "backup", "--plaintext")
	m := regexp.MustCompile(`^backup: .+, plaintext \(the store has no encryption key\); next incremental: savepoint backup --since (\d+)\n$`).FindStringSubmatch(full.stderr)
	if full.code != exitOK || m == nil || len(full.stdout) == 0 {
		t.Fatalf("backup --plaintext: exit %d, %d bytes, stderr %q", full.code, len(full.stdout), full.stderr)
	}
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "after-backup"}); err != nil {
		t.Fatal(err)
	}
	inc := runCLI(t, "--addr", addr, "backup", "--plaintext", "--since", m[1])
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
	if err != nil || len(sums) != 3 || sums[0].SessionID != "after-backup" || sums[2].SessionID != "report-1" || sums[2].PendingToolUseCount != 6 {
		t.Fatalf("restored: %+v %v", sums, err)
	}
}
