package integration_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestStartLogsWhatWasRecovered checks the one line a start logs about the
// store it opened: its sessions, those with a tool use in doubt, and the
// last commit, so that an operator sees a crash was survived.
func TestStartLogsWhatWasRecovered(t *testing.T) {
	dir := t.TempDir()
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*core.SaveRequest{
		{SessionID: "quiet", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hi"`}}},
		{SessionID: "paying", PendingToolUses: []core.ToolUse{{ID: "t1", Name: "pay", Class: core.SideEffect}}},
		{SessionID: "reading", PendingToolUses: []core.ToolUse{{ID: "t2", Name: "read", Class: core.ReadOnly}}},
	} {
		if _, err := s.SaveCheckpoint(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0)
	daemontest.RunInProcess(t, daemon.Config{DataDir: dir, Listen: "unix:" + daemontest.SocketPath(t)}, logger)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "recovered" {
				continue
			}
			if m["sessions"] != 3.0 || m["sessions_in_doubt"] != 1.0 {
				t.Errorf("recovered line %v, want 3 sessions, 1 in doubt", m)
			}
			if n, _ := m["last_commit"].(float64); n < 3 {
				t.Errorf("recovered line %v, want the last commit's sequence number, at least 3", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovered line in:\n%s", logs.String())
		}
	}
}
