package core_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// memTxn is a core.Txn over maps: the smallest store the write rules run on.
type memTxn struct {
	heads    map[string]*core.HeadRecord
	deleted  map[string]uint64
	calls    map[string]*core.LedgerEntry
	requests map[string]*core.RequestRecord
	messages map[uint64]core.Message
	revs     map[uint64]*core.RevisionRecord
	creates  int
}

func newMem() *memTxn {
	return &memTxn{heads: map[string]*core.HeadRecord{}, deleted: map[string]uint64{}, calls: map[string]*core.LedgerEntry{},
		requests: map[string]*core.RequestRecord{}, messages: map[uint64]core.Message{}, revs: map[uint64]*core.RevisionRecord{}}
}

func (m *memTxn) Head(sid string) (*core.HeadRecord, error) {
	h, ok := m.heads[sid]
	if !ok {
		return nil, nil
	}
	c := *h
	c.Segments = append([]core.Segment(nil), h.Segments...)
	return &c, nil
}
func (m *memTxn) DeletedEpoch(sid string) (uint64, error) { return m.deleted[sid], nil }
func (m *memTxn) Create(string, *core.HeadRecord) error   { m.creates++; return nil }
func (m *memTxn) PutHead(sid string, h *core.HeadRecord) error {
	c := *h
	m.heads[sid] = &c
	return nil
}
func (m *memTxn) PutLedgerEntry(_ string, c *core.LedgerEntry) error {
	x := *c
	m.calls[c.ToolUseID] = &x
	return nil
}
func (m *memTxn) PutRequest(_ string, r *core.RequestRecord) error {
	m.requests[r.RequestID] = r
	return nil
}
func (m *memTxn) PutRevision(_ string, r *core.RevisionRecord) error {
	m.revs[r.Revision] = r
	return nil
}
func (m *memTxn) PutMessages(_ string, first uint64, ms []core.Message) error {
	for i, msg := range ms {
		m.messages[first+uint64(i)] = msg
	}
	return nil
}
func (m *memTxn) LedgerEntry(_, id string) (*core.LedgerEntry, error) {
	c, ok := m.calls[id]
	if !ok {
		return nil, nil
	}
	x := *c
	return &x, nil
}
func (m *memTxn) Request(_, id string) (*core.RequestRecord, error) { return m.requests[id], nil }
func (m *memTxn) Revision(_ string, h *core.HeadRecord, rev uint64) (*core.RevisionRecord, error) {
	if rev == 0 {
		rev = h.Revision
	}
	r, ok := m.revs[rev]
	if !ok {
		return nil, core.ErrRevisionNotFound
	}
	return r, nil
}
func (m *memTxn) EachLedgerEntry(_ string, fn func(*core.LedgerEntry) (bool, error)) error {
	for _, id := range slices.Sorted(maps.Keys(m.calls)) {
		c := *m.calls[id]
		if more, err := fn(&c); err != nil || !more {
			return err
		}
	}
	return nil
}

var now = time.Unix(1_800_000_000, 0)

func msgs(n int) []core.Message {
	out := make([]core.Message, n)
	for i := range out {
		out[i] = core.Message{Role: "user", ContentJSON: `"m"`}
	}
	return out
}

func keep(n uint64) *uint64 { return &n }

// TestSaveRules runs the order of the checks: request id, then epoch, then
// status, then revision, each refusal with its sentinel.
func TestSaveRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  core.SaveRequest
		prep func(m *memTxn)
		want error
		rev  uint64
	}{
		{name: "create", req: core.SaveRequest{SessionID: "s"}, rev: 1},
		{name: "create above a deletion", req: core.SaveRequest{SessionID: "s", Epoch: 3}, prep: func(m *memTxn) { m.deleted["s"] = 3 }, want: core.ErrSessionFenced},
		{name: "missing", req: core.SaveRequest{SessionID: "s", ExpectedRevision: 1}, want: core.ErrSessionNotFound},
		{name: "exists", req: core.SaveRequest{SessionID: "old"}, want: core.ErrSessionExists},
		{name: "next", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2, Epoch: 1}, rev: 3},
		{name: "behind", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 1, Epoch: 1}, want: core.ErrRevisionMismatch},
		{name: "stale epoch before revision", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 1, Epoch: 7}, want: core.ErrSessionFenced},
		{name: "retry answers even when fenced", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 1, RequestID: "r1"},
			prep: func(m *memTxn) {
				r := core.SaveRequest{SessionID: "old", ExpectedRevision: 1, RequestID: "r1"}
				m.requests["r1"] = &core.RequestRecord{RequestID: "r1", Fingerprint: r.Fingerprint(), Revision: 2, Epoch: 1}
				m.heads["old"].Epoch, m.heads["old"].Resumed = 5, true
			}, rev: 2},
		{name: "request id reused", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2, RequestID: "r1", Task: "other"},
			prep: func(m *memTxn) { m.requests["r1"] = &core.RequestRecord{RequestID: "r1", Fingerprint: []byte("x")} }, want: core.ErrRequestIDReused},
		{name: "completed", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2}, prep: func(m *memTxn) { m.heads["old"].Status = core.StatusCompleted }, want: core.ErrSessionCompleted},
		{name: "keep beyond", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2, KeepMessages: keep(4)}, want: core.ErrKeepMessagesOutOfRange},
		{name: "segments disagree", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2}, prep: func(m *memTxn) { m.heads["old"].MessageCount = 9 }, want: core.ErrCheckpointCorrupt},
		{name: "pending call recorded", req: core.SaveRequest{SessionID: "old", ExpectedRevision: 2, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "x"}}},
			prep: func(m *memTxn) {
				m.calls["t1"] = &core.LedgerEntry{ToolUseID: "t1", Effect: &core.Effect{ToolUseID: "t1"}}
			}, want: core.ErrCallAlreadyRecorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem()
			m.heads["old"] = &core.HeadRecord{Status: core.StatusActive, Epoch: 1, Revision: 2, NextSeq: 3, MessageCount: 3, Segments: []core.Segment{{FirstSeq: 0, Count: 3}}}
			if tc.prep != nil {
				tc.prep(m)
			}
			res, err := core.Save(m, &tc.req, now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil || res.Revision != tc.rev {
				t.Fatalf("got %+v, %v; want revision %d", res, err, tc.rev)
			}
		})
	}
}

// TestSaveHistory: a save keeps a prefix of the head's segments and appends
// after the last stored sequence number, so a truncated history never
// overwrites messages an older revision still uses.
func TestSaveHistory(t *testing.T) {
	m := newMem()
	save := func(exp uint64, k *uint64, n int) core.SaveResult {
		t.Helper()
		res, err := core.Save(m, &core.SaveRequest{SessionID: "s", ExpectedRevision: exp, KeepMessages: k, AppendMessages: msgs(n)}, now)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	save(0, nil, 3)
	if m.creates != 1 {
		t.Fatalf("Create called %d times for a new session", m.creates)
	}
	save(1, keep(1), 2)
	r := save(2, nil, 1)
	if m.creates != 1 {
		t.Fatalf("Create called %d times in all, want once", m.creates)
	}
	want := []core.Segment{{FirstSeq: 0, Count: 1}, {FirstSeq: 3, Count: 3}}
	got := m.revs[3].Segments
	if r.MessageCount != 4 || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("revision 3: %d messages in %v, want 4 in %v", r.MessageCount, got, want)
	}
	if got := m.revs[1].Segments; len(got) != 1 || got[0] != (core.Segment{FirstSeq: 0, Count: 3}) {
		t.Fatalf("revision 1 changed: %v", got)
	}
}

// TestEffectRules: Begin needs the call pending in the latest revision and
// gives one key; Record keeps the first effect, flags a late one, and
// refuses a different one.
func TestEffectRules(t *testing.T) {
	m := newMem()
	tu := []core.ToolUse{{ID: "t1", Name: "pay"}, {ID: "t2", Name: "pay"}}
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s", PendingToolUses: tu}, now); err != nil {
		t.Fatal(err)
	}
	b1, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1}, now)
	if err != nil || b1.AlreadyBegun || b1.IdempotencyKey == "" {
		t.Fatalf("first begin: %+v %v", b1, err)
	}
	if b2, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1}, now); err != nil || !b2.AlreadyBegun || b2.IdempotencyKey != b1.IdempotencyKey {
		t.Fatalf("second begin: %+v %v", b2, err)
	}
	if _, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 2}, now); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("begin with another epoch: %v", err)
	}
	if _, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "nope", Epoch: 1}, now); !errors.Is(err, core.ErrCallNotPending) {
		t.Fatalf("begin of an unknown call: %v", err)
	}
	e := core.Effect{ToolUseID: "t1", Output: "ok"}
	if st, already, err := core.Record(m, "s", e, now); err != nil || already || st.Name != "pay" || st.Late {
		t.Fatalf("record: %+v %v %v", st, already, err)
	}
	if _, already, err := core.Record(m, "s", e, now); err != nil || !already {
		t.Fatalf("same record again: %v %v", already, err)
	}
	if _, _, err := core.Record(m, "s", core.Effect{ToolUseID: "t1", Output: "other"}, now); !errors.Is(err, core.ErrEffectConflict) {
		t.Fatalf("different record: %v", err)
	}
	if _, _, err := core.Record(m, "s", core.Effect{ToolUseID: "t1", Name: "refund", Output: "ok"}, now); !errors.Is(err, core.ErrToolNameMismatch) {
		t.Fatalf("record under another name: %v", err)
	}
	if _, err := core.Begin(m, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1}, now); !errors.Is(err, core.ErrCallAlreadyRecorded) {
		t.Fatalf("begin of a recorded call: %v", err)
	}
	// Point B clears t2 without a record: recorded later, it is late.
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if st, _, err := core.Record(m, "s", core.Effect{ToolUseID: "t2", Output: "ok"}, now); err != nil || !st.Late {
		t.Fatalf("late record: %+v %v", st, err)
	}
	if _, _, err := core.Record(m, "s", core.Effect{ToolUseID: "t9"}, now); !errors.Is(err, core.ErrCallUnknown) {
		t.Fatalf("record of a call never pending: %v", err)
	}
}

// TestResumeAndComplete: Resume takes over an active session; a completed
// one is returned unchanged unless reopened; Complete is first-wins.
func TestResumeAndComplete(t *testing.T) {
	m := newMem()
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s"}, now); err != nil {
		t.Fatal(err)
	}
	cp, err := core.Resume(m, "s", false)
	if err != nil || cp.Epoch != 2 || !m.heads["s"].Resumed {
		t.Fatalf("resume: %+v %v", cp, err)
	}
	if _, err := core.Complete(m, &core.CompleteRequest{SessionID: "s", Epoch: 1, Status: core.StatusCompleted}, now); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("complete with the old epoch: %v", err)
	}
	req := &core.CompleteRequest{SessionID: "s", Epoch: 2, Status: core.StatusCompleted, FinalOutput: "done", RequestID: "c1"}
	if res, err := core.Complete(m, req, now); err != nil || res.Already {
		t.Fatalf("complete: %+v %v", res, err)
	}
	if res, err := core.Complete(m, &core.CompleteRequest{SessionID: "s", Epoch: 2, Status: core.StatusCompleted, FinalOutput: "done"}, now); err != nil || !res.Already {
		t.Fatalf("complete again: %+v %v", res, err)
	}
	if _, err := core.Complete(m, &core.CompleteRequest{SessionID: "s", Epoch: 2, Status: core.StatusFailed}, now); !errors.Is(err, core.ErrSessionCompleted) {
		t.Fatalf("complete otherwise: %v", err)
	}
	if cp, err := core.Resume(m, "s", false); err != nil || cp.Epoch != 2 || cp.Status != core.StatusCompleted {
		t.Fatalf("resume of a completed session: %+v %v", cp, err)
	}
	if cp, err := core.Resume(m, "s", true); err != nil || cp.Epoch != 3 || cp.Status != core.StatusActive || m.heads["s"].FinalOutput != "" {
		t.Fatalf("reopen: %+v %v", cp, err)
	}
	if _, err := core.Resume(m, "gone", false); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("resume of a missing session: %v", err)
	}
}

// TestRewind: a rewind makes a new revision equal to the old one, its calls
// pending again, lists what was performed and begun since, and a retry
// answers the first rewind's result.
func TestRewind(t *testing.T) {
	m := newMem()
	tu := []core.ToolUse{{ID: "pay", Name: "pay"}, {ID: "look", Name: "look", Class: core.ReadOnly}}
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s", Task: "t", AppendMessages: msgs(1), PendingToolUses: tu}, now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Second)
	for _, id := range []string{"pay", "look"} {
		if _, _, err := core.Record(m, "s", core.Effect{ToolUseID: id, Output: "ok"}, later); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := core.Save(m, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1, AppendMessages: msgs(2)}, later); err != nil {
		t.Fatal(err)
	}
	req := &core.RewindRequest{SessionID: "s", Revision: 1, Epoch: 1, RequestID: "rw"}
	res, err := core.Rewind(m, req, later)
	if err != nil || res.Revision != 3 || res.MessageCount != 1 {
		t.Fatalf("rewind: %+v %v", res, err)
	}
	if len(res.PerformedAfter) != 1 || res.PerformedAfter[0].ToolUseID != "pay" || len(res.InDoubtAfter) != 0 {
		t.Fatalf("after revision 1: performed %+v, in doubt %+v; want the side-effecting call only", res.PerformedAfter, res.InDoubtAfter)
	}
	if m.calls["pay"].LastPendingRevision != 3 || m.calls["pay"].Effect == nil || m.heads["s"].PendingCount != 2 {
		t.Fatalf("calls after the rewind: %+v, head %+v", m.calls["pay"], m.heads["s"])
	}
	if got := m.heads["s"].Segments; len(got) != 1 || got[0] != (core.Segment{FirstSeq: 0, Count: 1}) {
		t.Fatalf("head segments after the rewind: %v", got)
	}
	m.heads["s"].Epoch, m.heads["s"].Resumed = 9, true // taken over since: the retry still answers
	if again, err := core.Rewind(m, req, later); err != nil || again.Revision != 3 {
		t.Fatalf("retry: %+v %v", again, err)
	}
	if _, err := core.Rewind(m, &core.RewindRequest{SessionID: "s", Revision: 1, Epoch: 1}, later); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("rewind with a stale epoch: %v", err)
	}
	if _, err := core.Rewind(m, &core.RewindRequest{SessionID: "s", Revision: 7, Epoch: 9}, later); !errors.Is(err, core.ErrRevisionNotFound) {
		t.Fatalf("rewind to a missing revision: %v", err)
	}
}
