package badgerstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)} }
func userMsg(s string) core.Message {
	return core.Message{Role: "user", ContentJSON: fmt.Sprintf("%q", s)}
}
func mustSave(t *testing.T, s *Store, r *core.SaveRequest) core.SaveResult {
	t.Helper()
	res, err := s.SaveCheckpoint(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRetentionCompletedAndIdle(t *testing.T) {
	clk := newClock()
	s, err := Open("", Options{InMemory: true, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"done", "failed", "old", "fresh"} {
		mustSave(t, s, &core.SaveRequest{SessionID: id, AppendMessages: []core.Message{userMsg(id)}})
	}
	for id, st := range map[string]core.SessionStatus{"done": core.StatusCompleted, "failed": core.StatusFailed} {
		if _, err := s.CompleteSession(ctx, &core.CompleteRequest{SessionID: id, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(2 * time.Hour)
	mustSave(t, s, &core.SaveRequest{SessionID: "fresh", ExpectedRevision: 1})
	r := Retention{Completed: time.Hour, Idle: 3 * time.Hour}

	live := func() string {
		t.Helper()
		sums, err := s.ListSessions(ctx, "", 10, core.SessionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range sums {
			ids = append(ids, x.SessionID)
		}
		return strings.Join(ids, ",")
	}
	rep, err := s.Maintain(ctx, r)
	if err != nil || rep.DeletedSessions != 2 || live() != "fresh,old" {
		t.Fatalf("completed 2h ago, retained 1h: %+v %v, left %s", rep, err, live())
	}
	clk.add(2 * time.Hour) // old: 4h idle; fresh: 2h
	if rep, err := s.Maintain(ctx, r); err != nil || rep.DeletedSessions != 1 || live() != "fresh" {
		t.Fatalf("idle 4h, retained 3h: %+v %v, left %s", rep, err, live())
	}
	// A deleted session stays fenced: its old epoch cannot re-create it.
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "old", Epoch: 1})
	if !errors.Is(err, core.ErrSessionFenced) {
		t.Errorf("re-create with the deleted epoch: %v", err)
	}
	if _, err := s.Checkpoint(ctx, "done", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Errorf("deleted session read: %v", err)
	}
	// Zero retention removes nothing.
	clk.add(1000 * time.Hour)
	if rep, err := s.Maintain(ctx, Retention{}); err != nil || rep.DeletedSessions != 0 || live() != "fresh" {
		t.Errorf("zero retention: %+v %v, left %s", rep, err, live())
	}
}

func TestRetainRevisions(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	// 8 revisions of one message each; revision 6 rewinds to 2 messages
	// (keep_messages), so messages 2-4 are reached only by revisions 3-5.
	rev := mustSave(t, s, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{userMsg("m0")},
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "write"}}}).Revision
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "written"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 8; i++ {
		req := &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, AppendMessages: []core.Message{userMsg(fmt.Sprintf("m%d", i))}}
		if i == 5 {
			keep := uint64(2)
			req.KeepMessages = &keep
		}
		rev = mustSave(t, s, req).Revision
	}
	before, err := s.Checkpoint(ctx, "s", 0)
	if err != nil || before.Revision != 8 || before.MessageCount != 5 {
		t.Fatalf("seed: %+v %v", before, err)
	}
	rep, err := s.Maintain(ctx, Retention{Revisions: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Revisions 6-8 reach messages m0, m1, m5, m6, m7; m2-m4 go.
	if rep.PrunedRevisions != 5 || rep.PrunedMessages != 3 || !rep.Compacted {
		t.Fatalf("pass: %+v", rep)
	}
	for r := uint64(1); r <= 8; r++ {
		_, err := s.Checkpoint(ctx, "s", r)
		if kept := r >= 6; kept != (err == nil) || (!kept && !errors.Is(err, core.ErrRevisionNotFound)) {
			t.Errorf("revision %d: %v", r, err)
		}
	}
	ms, err := s.Messages(ctx, "s", 0, 0, 1<<20, 0)
	if err != nil || len(ms) != 5 || ms[0].ContentJSON != `"m0"` || ms[4].ContentJSON != `"m7"` {
		t.Fatalf("latest history after pruning: %+v %v", ms, err)
	}
	if ms, err := s.Messages(ctx, "s", 6, 0, 1<<20, 0); err != nil || len(ms) != 3 {
		t.Fatalf("revision 6's history: %+v %v", ms, err)
	}
	if n := countKeys(t, s, sessionScope(kindMessage, "s")); n != 5 {
		t.Errorf("%d message records left, want 5", n)
	}
	// The ledger is kept: t1, pending only in the pruned revision 1.
	if es, err := s.Effects(ctx, "s", "", 10); err != nil || len(es) != 1 || es[0].Effect.Output != "written" {
		t.Errorf("ledger after pruning: %+v %v", es, err)
	}
	if rep, err := s.Verify(ctx); err != nil || len(rep.Damaged) != 0 {
		t.Errorf("verify after pruning: %+v %v", rep, err)
	}
	// Saving goes on; a second pass with nothing to prune removes nothing.
	mustSave(t, s, &core.SaveRequest{SessionID: "s", ExpectedRevision: 8, AppendMessages: []core.Message{userMsg("m8")}})
	if rep, err := s.Maintain(ctx, Retention{Revisions: 3}); err != nil || rep.PrunedRevisions != 1 || rep.PrunedMessages != 0 {
		t.Errorf("second pass: %+v %v", rep, err)
	}
}

// dataSize is the size of dir's tables and value logs: the write-ahead logs
// are preallocated at a fixed size.
func dataSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(d.Name()); !d.IsDir() && (ext == ".sst" || ext == ".vlog") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetentionReclaimsDisk fills a store, completes most of its sessions
// and checks that a pass (retention, compaction, value-log GC) gives most
// of the disk back. Small and large messages are mixed, so both the LSM tree
// and the value log hold data.
// fillForGC stores 40 sessions of 100 messages (half of them 8 KiB, in
// the value log), completes 36, and reopens the store so that everything is
// in tables and logs; it returns the reopened store.
func fillForGC(t *testing.T, dir string, clk *clock) *Store {
	t.Helper()
	s := fillForGCWith(t, dir, Options{Now: clk.now, DiskReserve: 1})
	t.Cleanup(func() { s.Close() })
	return s
}

// expireFinished expires the 36 sessions of fillForGC that finished, s04
// to s39, leaving their values in the value log as garbage.
func expireFinished(t *testing.T, s *Store) {
	t.Helper()
	var completed []string
	for i := 4; i < 40; i++ {
		completed = append(completed, fmt.Sprintf("s%02d", i))
	}
	if n, err := s.expire(ctx, completed, func(*storagev1.SessionRecord) bool { return true }); err != nil || n != 36 {
		t.Fatalf("expire: %d, %v", n, err)
	}
}

// fillForGCWith is fillForGC with the store opened with opts, which the
// caller closes.
func fillForGCWith(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	old := valueLogFileSize
	valueLogFileSize = 4 << 20
	t.Cleanup(func() { valueLogFileSize = old })
	open := func() *Store {
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	big, small := strings.Repeat("b", 8<<10), strings.Repeat("s", 200)
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		var ms []core.Message
		for j := range 100 {
			body := small
			if j%2 == 0 {
				body = big
			}
			ms = append(ms, userMsg(fmt.Sprintf("%d %s", j, body)))
		}
		mustSave(t, s, &core.SaveRequest{SessionID: id, AppendMessages: ms})
		if i >= 4 { // 36 of 40 finish
			if _, err := s.CompleteSession(ctx, &core.CompleteRequest{SessionID: id, Status: core.StatusCompleted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A restart flushes the memtables: the data is in tables and logs.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open()
}

func TestRetentionReclaimsDisk(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := fillForGC(t, dir, clk)
	full := dataSize(t, dir)
	clk.add(48 * time.Hour)
	rep, err := s.Maintain(ctx, Retention{Completed: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	after := dataSize(t, dir)
	t.Logf("%d bytes before, %d after (%.0f%%): %+v", full, after, 100*float64(after)/float64(full), rep)
	if rep.DeletedSessions != 36 || rep.RewrittenLogs == 0 {
		t.Errorf("pass: %+v", rep)
	}
	if after > full/2 {
		t.Errorf("disk use %d -> %d bytes: not halved after deleting 90%% of the sessions", full, after)
	}
	for i := range 4 {
		if ms, err := s.Messages(ctx, fmt.Sprintf("s%02d", i), 0, 0, 8<<20, 0); err != nil || len(ms) != 100 {
			t.Fatalf("kept session s%02d: %d messages, %v", i, len(ms), err)
		}
	}
}

// TestMaintenanceTicker checks that Open runs the passes by itself.
func TestMaintenanceTicker(t *testing.T) {
	clk := newClock()
	s, err := Open("", Options{InMemory: true, Now: clk.now, Retention: Retention{Idle: time.Hour, Interval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustSave(t, s, &core.SaveRequest{SessionID: "idle"})
	clk.add(2 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Checkpoint(ctx, "idle", 0); errors.Is(err, core.ErrSessionNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not deleted within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestValueLogGCSyncsBeforeDelete: the value-log files the GC rewrites are
// deleted only after a sync has made their moved values durable (Badger
// alone deletes them first, which a power loss would turn into lost
// acknowledged values).
func TestValueLogGCSyncsBeforeDelete(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := fillForGC(t, dir, clk)
	expireFinished(t, s)
	before := vlogFiles(t, dir)
	// The engine's background checkpoint calls badgerSync too, on its own
	// goroutine: mu guards what the hooks record.
	var mu sync.Mutex
	var atSync []map[string]bool
	var order []string
	badgerSync := s.eng.badgerSync
	s.eng.badgerSync = func() error {
		mu.Lock()
		order = append(order, "keys")
		atSync = append(atSync, vlogFiles(t, dir))
		mu.Unlock()
		return badgerSync()
	}
	s.syncVlogs = func() error {
		mu.Lock()
		order = append(order, "values")
		mu.Unlock()
		return syncVlogFiles(dir)
	}
	var rep MaintenanceReport
	if err := s.collectValueLog(&rep); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	gotOrder, gotAtSync := append([]string(nil), order...), append([]map[string]bool(nil), atSync...)
	mu.Unlock()
	after := vlogFiles(t, dir)
	var removed []string
	for f := range before {
		if !after[f] {
			removed = append(removed, f)
		}
	}
	if rep.RewrittenLogs == 0 || len(removed) == 0 {
		t.Fatalf("the GC rewrote %d logs and removed %v: nothing to check", rep.RewrittenLogs, removed)
	}
	if len(gotAtSync) == 0 {
		t.Fatalf("the GC rewrote %d logs and removed %v without a sync", rep.RewrittenLogs, removed)
	}
	// The moved values are durable before the keys pointing at them
	// (defect 12 of docs/reliability.md).
	if len(gotOrder) < 2 || gotOrder[0] != "values" || gotOrder[1] != "keys" {
		t.Errorf("the GC's syncs ran in the order %v, want the value logs before the keys", gotOrder)
	}
	last := gotAtSync[len(gotAtSync)-1]
	for _, f := range removed {
		if !last[f] {
			t.Errorf("%s was deleted before the sync that made its moved values durable", f)
		}
	}
	for i := range 4 {
		if ms, err := s.Messages(ctx, fmt.Sprintf("s%02d", i), 0, 0, 8<<20, 0); err != nil || len(ms) != 100 {
			t.Fatalf("kept session s%02d: %d messages, %v", i, len(ms), err)
		}
	}
}

func vlogFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, n := range names {
		set[filepath.Base(n)] = true
	}
	return set
}
