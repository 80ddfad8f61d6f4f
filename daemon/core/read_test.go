package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

func TestSelects(t *testing.T) {
	h := &core.HeadRecord{Status: core.StatusActive, PendingCount: 1, UpdateTime: now, Labels: map[string]string{"team": "a", "env": "prod"}}
	for _, tc := range []struct {
		name string
		f    core.SessionFilter
		want bool
	}{
		{"none", core.SessionFilter{}, true},
		{"status", core.SessionFilter{Status: core.StatusActive}, true},
		{"other status", core.SessionFilter{Status: core.StatusCompleted}, false},
		{"pending", core.SessionFilter{HasPendingToolUses: true}, true},
		{"idle long enough", core.SessionFilter{UpdatedBefore: now.Add(time.Second)}, true},
		{"updated since", core.SessionFilter{UpdatedBefore: now}, false},
		{"labels", core.SessionFilter{Labels: map[string]string{"team": "a"}}, true},
		{"other label", core.SessionFilter{Labels: map[string]string{"team": "b"}}, false},
	} {
		if got := tc.f.Selects(h); got != tc.want {
			t.Errorf("%s: Selects = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (core.SessionFilter{HasPendingToolUses: true}).Selects(&core.HeadRecord{Status: core.StatusActive}) {
		t.Error("a session without pending tool uses passed HasPendingToolUses")
	}
}

// corruptLedger is a memTxn whose ledger entries cannot be read.
type corruptLedger struct{ *memTxn }

func (corruptLedger) LedgerEntry(sid, _ string) (*core.LedgerEntry, error) {
	return nil, core.Corrupt(nil, sid, errors.New("bad checksum"))
}

// TestPendingToolUses: each pending tool use carries its begin marker and effect;
// the in-doubt count is Reconcile's, and every pending tool use when the calls
// cannot be read.
func TestPendingToolUses(t *testing.T) {
	m := newMem()
	tu := []core.ToolUse{{ID: "a", Name: "pay"}, {ID: "b", Name: "pay", BeginTracked: true}, {ID: "c", Name: "look", Class: core.ReadOnly}}
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s", PendingToolUses: tu}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "b", Epoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := core.Record(m, "s", core.Effect{ToolUseID: "a", Output: "ok"}, now); err != nil {
		t.Fatal(err)
	}
	h, _ := m.Head("s")
	rev, calls, err := core.PendingToolUses(m, "s", h)
	if err != nil || rev != 1 || len(calls) != 3 {
		t.Fatalf("PendingToolUses: %d %+v %v", rev, calls, err)
	}
	if calls[0].Effect == nil || !calls[1].Begun || calls[1].IdempotencyKey == "" || calls[2].Begun || calls[2].Effect != nil {
		t.Fatalf("pending tool uses: %+v", calls)
	}
	if n, err := core.InDoubt(m, "s", h); err != nil || n != 1 {
		t.Fatalf("InDoubt = %d, %v; want 1 (the begun side effect)", n, err)
	}
	if n, err := core.InDoubt(corruptLedger{m}, "s", h); err != nil || n != 3 {
		t.Fatalf("InDoubt with damaged calls = %d, %v; want all 3", n, err)
	}
}

// TestMessagePage: the history's ranges from an index, and a page that
// always takes one message, then stops before its byte or count budget.
func TestMessagePage(t *testing.T) {
	segs := []core.Segment{{FirstSeq: 0, Count: 2}, {FirstSeq: 10, Count: 3}}
	var got [][2]uint64
	for first, end := range core.SeqRanges(segs, 3) {
		got = append(got, [2]uint64{first, end})
	}
	if len(got) != 1 || got[0] != [2]uint64{11, 13} {
		t.Fatalf("ranges from index 3: %v, want [[11 13]]", got)
	}
	m := core.Message{Role: "user", ContentJSON: `"0123456789"`} // 32 bytes by MessageSize
	p := core.MessagePage{MaxBytes: 1}
	if !p.Add(m) || p.Add(m) || len(p.Messages) != 1 {
		t.Fatalf("a page over budget took %d messages, want exactly the first", len(p.Messages))
	}
	p = core.MessagePage{MaxBytes: 1 << 20, MaxCount: 2}
	if !p.Add(m) || !p.Add(m) || p.Add(m) {
		t.Fatalf("a page of count 2 took %d messages", len(p.Messages))
	}
}
