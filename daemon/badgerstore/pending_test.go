package badgerstore

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// A session whose pending tool uses cannot be read is still listed, with every
// pending call counted in doubt; the others are counted as Reconcile decides.
func TestListSessionsInDoubtOfDamagedLedger(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	for _, id := range []string{"bad", "good"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id,
			PendingToolUses: []core.ToolUse{{ID: "r", Name: "read", Class: core.ReadOnly}}}); err != nil {
			t.Fatal(err)
		}
	}
	damage(t, s, ledgerEntryKey("bad", "r"))
	sums, err := s.ListSessions(ctx, "", 10, core.SessionFilter{})
	if err != nil || len(sums) != 2 {
		t.Fatalf("list: %+v %v", sums, err)
	}
	for i, want := range []uint32{1, 0} {
		if got := sums[i]; got.PendingToolUseCount != 1 || got.InDoubtToolUseCount != want {
			t.Errorf("%s: %d pending, %d in doubt; want 1, %d", got.SessionID, got.PendingToolUseCount, got.InDoubtToolUseCount, want)
		}
	}
}
