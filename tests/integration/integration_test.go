package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// These tests drive the real savepointd binary over its Unix socket.

var ctx = context.Background()

func errInfo(t *testing.T, err error) (codes.Code, string, map[string]string) {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.Domain != "savepoint.v1" {
				t.Fatalf("ErrorInfo domain %q", info.Domain)
			}
			return st.Code(), info.Reason, info.Metadata
		}
	}
	return st.Code(), "", nil
}

func wantReason(t *testing.T, err error, code codes.Code, reason string) map[string]string {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v %s", code, reason)
	}
	c, r, md := errInfo(t, err)
	if c != code || r != reason {
		t.Fatalf("got %v %s (%v), want %v %s", c, r, err, code, reason)
	}
	return md
}

func userMsg(text string) *savepointv1.Message {
	b, _ := json.Marshal(text)
	return &savepointv1.Message{Role: "user", ContentJson: string(b)}
}

type sp = savepointv1.SavepointServiceClient

func mustSave(t *testing.T, c sp, req *savepointv1.SaveCheckpointRequest) *savepointv1.SaveCheckpointResponse {
	t.Helper()
	resp, err := c.SaveCheckpoint(ctx, req)
	if err != nil {
		t.Fatalf("save %s@%d: %v", req.SessionId, req.ExpectedRevision, err)
	}
	return resp
}

func TestFullCycleAndKill(t *testing.T) {
	d := daemontest.Start(t)
	c := d.Client
	const sid = "report-1"
	r := mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, Task: "write a report", AppendMessages: []*savepointv1.Message{userMsg("go")}})
	if r.Revision != 1 || r.Epoch != 1 || r.MessageCount != 1 {
		t.Fatalf("create: %v", r)
	}
	// Point A: the assistant message and the pending tool use.
	call := &savepointv1.ToolUse{ToolUseId: "toolu_03", Name: "write_report", InputJson: `{"path":"report.txt"}`,
		EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, Epoch: 1, Turn: 1,
		AppendMessages:  []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"toolu_03","name":"write_report","input":{}}]`}},
		PendingToolUses: []*savepointv1.ToolUse{call}})
	b, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "toolu_03", Epoch: 1})
	if err != nil || b.IdempotencyKey == "" {
		t.Fatalf("begin: %v %v", b, err)
	}
	e, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "toolu_03", Output: "written"})
	if err != nil || e.AlreadyRecorded || e.Effect.Name != "write_report" {
		t.Fatalf("record: %v %v", e, err)
	}
	// The agent dies here, before Point B; so does the daemon.
	d.Kill()
	d.Restart()
	res, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid})
	if err != nil || res.Epoch != 2 || res.Checkpoint.Revision != 2 || len(res.Checkpoint.Messages) != 2 || len(res.Checkpoint.PendingToolUses) != 1 {
		t.Fatalf("resume after kill: %v %v", res, err)
	}
	if !proto.Equal(res.Checkpoint.PendingToolUses[0], call) {
		t.Fatalf("pending after kill: %v", res.Checkpoint.PendingToolUses[0])
	}
	rec, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: sid})
	if err != nil || len(rec.Resolutions) != 1 || rec.Resolutions[0].Decision != savepointv1.Decision_DECISION_REUSE ||
		rec.Resolutions[0].Effect.Output != "written" {
		t.Fatalf("reconcile: %v %v", rec, err)
	}
	// Point B with the new epoch.
	r = mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 2, Epoch: 2, Turn: 1,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"toolu_03","content":"written"}]`}}})
	if r.Revision != 3 || r.MessageCount != 3 || r.Epoch != 2 {
		t.Fatalf("point B: %v", r)
	}
}

func TestKillKeepsEveryAcknowledgedWrite(t *testing.T) {
	d := daemontest.Start(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("s%d", i)
			rev := uint64(0)
			for j := range 20 {
				r, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: rev, Turn: uint32(j),
					AppendMessages:  []*savepointv1.Message{userMsg(fmt.Sprint(j))},
					PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: fmt.Sprintf("t%d", j), Name: "w"}}})
				if err != nil {
					errs <- err
					return
				}
				rev = r.Revision
				if _, err := d.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: fmt.Sprintf("t%d", j), Output: fmt.Sprint(j)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d.Kill()
	d.Restart()
	for i := range n {
		sid := fmt.Sprintf("s%d", i)
		g, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		if err != nil || g.Checkpoint.Revision != 20 || g.Checkpoint.MessageCount != 20 || g.Checkpoint.Turn != 19 {
			t.Fatalf("%s after kill: %v %v", sid, g, err)
		}
		for j := range 20 {
			e, err := d.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: fmt.Sprintf("t%d", j), Output: fmt.Sprint(j)})
			if err != nil || !e.AlreadyRecorded {
				t.Fatalf("%s effect t%d after kill: %v %v", sid, j, e, err)
			}
		}
	}
}

func TestReconcileRules(t *testing.T) {
	c := daemontest.Start(t).Client
	const sid = "rec"
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid})
	ro, idem, se := savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY, savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT, savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
	calls := []*savepointv1.ToolUse{
		{ToolUseId: "hit", Name: "write_report", EffectClass: se},
		{ToolUseId: "ro", Name: "read_notes", EffectClass: ro},
		{ToolUseId: "idem", Name: "pay", EffectClass: idem},
		{ToolUseId: "never", Name: "write_report", EffectClass: se, BeginTracked: true},
		{ToolUseId: "begun", Name: "write_report", EffectClass: se, BeginTracked: true},
		{ToolUseId: "untracked", Name: "write_report"},
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, PendingToolUses: calls})
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "hit", Output: "done"}); err != nil {
		t.Fatal(err)
	}
	ib, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "idem"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "begun"}); err != nil {
		t.Fatal(err)
	}
	want := []savepointv1.Decision{savepointv1.Decision_DECISION_REUSE, savepointv1.Decision_DECISION_RUN, savepointv1.Decision_DECISION_RUN,
		savepointv1.Decision_DECISION_RUN, savepointv1.Decision_DECISION_IN_DOUBT, savepointv1.Decision_DECISION_IN_DOUBT}
	first, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: sid})
	if err != nil || first.Revision != 2 || len(first.Resolutions) != len(want) {
		t.Fatalf("reconcile: %v %v", first, err)
	}
	for i, r := range first.Resolutions {
		if r.ToolUse.ToolUseId != calls[i].ToolUseId || r.Decision != want[i] {
			t.Errorf("%s: %v, want %v", calls[i].ToolUseId, r.Decision, want[i])
		}
		if (r.Decision == savepointv1.Decision_DECISION_IN_DOUBT) != (r.ToolResultText != "") {
			t.Errorf("%s: tool_result_text %q", calls[i].ToolUseId, r.ToolResultText)
		}
	}
	if first.Resolutions[0].Effect.GetOutput() != "done" || first.Resolutions[2].IdempotencyKey != ib.IdempotencyKey || !first.Resolutions[4].Begun {
		t.Errorf("details: %v", first.Resolutions)
	}
	second, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: sid})
	if err != nil || !proto.Equal(first, second) {
		t.Fatalf("reconcile is not repeatable: %v %v", second, err)
	}
	if g, _ := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid}); g.Checkpoint.Revision != 2 || g.Checkpoint.Epoch != 1 {
		t.Fatalf("reconcile wrote: %v", g.Checkpoint)
	}
}

func TestRequestIDRetryAndReuse(t *testing.T) {
	c := daemontest.Start(t).Client
	id := uuid.NewString()
	req := &savepointv1.SaveCheckpointRequest{SessionId: "s", RequestId: id, AppendMessages: []*savepointv1.Message{userMsg("a")}}
	first := mustSave(t, c, req)
	again := mustSave(t, c, req)
	if !proto.Equal(first, again) {
		t.Fatalf("retry: %v, want %v", again, first)
	}
	req.AppendMessages = []*savepointv1.Message{userMsg("b")}
	_, err := c.SaveCheckpoint(ctx, req)
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED")
	g, _ := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "s"})
	if g.Checkpoint.Revision != 1 || g.Checkpoint.MessageCount != 1 {
		t.Fatalf("retry or reuse changed the session: %v", g.Checkpoint)
	}
}

func TestFencing(t *testing.T) {
	c := daemontest.Start(t).Client
	const sid = "f"
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid})
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "t", Name: "w"}}})
	for range 2 {
		if _, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
	}
	for _, stale := range []uint64{0, 1, 2} {
		_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 2, Epoch: stale})
		md := wantReason(t, err, codes.Aborted, "SESSION_FENCED")
		if md["current_epoch"] != "3" || md["current_revision"] != "2" {
			t.Fatalf("metadata %v", md)
		}
		_, err = c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 7, Epoch: stale})
		wantReason(t, err, codes.Aborted, "SESSION_FENCED")
		_, err = c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "t", Epoch: stale})
		wantReason(t, err, codes.Aborted, "SESSION_FENCED")
		_, err = c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: sid, Epoch: stale})
		wantReason(t, err, codes.Aborted, "SESSION_FENCED")
	}
	_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, Epoch: 3})
	md := wantReason(t, err, codes.Aborted, "REVISION_MISMATCH")
	if md["current_revision"] != "2" {
		t.Fatalf("metadata %v", md)
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 2, Epoch: 3})
}

func TestDeleteThenRecreateKeepsStaleFenced(t *testing.T) {
	c := daemontest.Start(t).Client
	const sid = "d"
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, AppendMessages: []*savepointv1.Message{userMsg("old")}})
	stale, _ := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid}) // epoch 2: the stale process
	owner, _ := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid}) // epoch 3
	del, err := c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: sid, Epoch: owner.Epoch})
	if err != nil || del.TombstoneEpoch != 3 {
		t.Fatalf("delete: %v %v", del, err)
	}
	_, err = c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
	wantReason(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	r := mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid})
	if r.Revision != 1 || r.Epoch != 4 || r.MessageCount != 0 {
		t.Fatalf("re-created: %v", r)
	}
	_, err = c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, Epoch: stale.Epoch})
	wantReason(t, err, codes.Aborted, "SESSION_FENCED")
}

func TestCollidingIDsStayApart(t *testing.T) {
	c := daemontest.Start(t).Client
	sessions := []string{"a", "ab", "a.b", "a:b", "a-b", "A"}
	calls := []string{"t", "t/1", "t:1", "ü", "t\u00e9/", strings.Repeat("z", 512)}
	for _, sid := range sessions {
		var pending []*savepointv1.ToolUse
		for _, id := range calls {
			pending = append(pending, &savepointv1.ToolUse{ToolUseId: id, Name: "w"})
		}
		mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, AppendMessages: []*savepointv1.Message{userMsg(sid)}, PendingToolUses: pending})
	}
	for _, id := range calls {
		if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "a", ToolUseId: id, Output: "a:" + id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sid := range sessions {
		g, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		if err != nil || len(g.Checkpoint.Messages) != 1 || !proto.Equal(g.Checkpoint.Messages[0], userMsg(sid)) {
			t.Fatalf("%s: %v %v", sid, g, err)
		}
		rec, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rec.Resolutions {
			if reused := r.Decision == savepointv1.Decision_DECISION_REUSE; reused != (sid == "a") {
				t.Errorf("session %s call %q: %v", sid, r.ToolUse.ToolUseId, r.Decision)
			}
		}
	}
}

func TestRewriteLeavesOlderRevisions(t *testing.T) {
	c := daemontest.Start(t).Client
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "r", AppendMessages: []*savepointv1.Message{userMsg("a"), userMsg("b"), userMsg("c")}})
	keep := uint64(1)
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "r", ExpectedRevision: 1, KeepMessages: &keep, AppendMessages: []*savepointv1.Message{userMsg("X")}})
	for rev, want := range map[uint64][]string{1: {"a", "b", "c"}, 2: {"a", "X"}} {
		g, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "r", Revision: &rev})
		if err != nil || len(g.Checkpoint.Messages) != len(want) {
			t.Fatalf("revision %d: %v %v", rev, g, err)
		}
		for i, w := range want {
			if !proto.Equal(g.Checkpoint.Messages[i], userMsg(w)) {
				t.Errorf("revision %d message %d: %v", rev, i, g.Checkpoint.Messages[i])
			}
		}
	}
	keep = 5
	_, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "r", ExpectedRevision: 2, KeepMessages: &keep})
	wantReason(t, err, codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE")
	rev := uint64(3)
	_, err = c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "r", Revision: &rev})
	wantReason(t, err, codes.NotFound, "REVISION_NOT_FOUND")
}

// TestPagingLargeHistory reads a 6 MiB history with a client left at gRPC's
// default 4 MiB receive limit.
func TestPagingLargeHistory(t *testing.T) {
	c := daemontest.Start(t).Client
	big := strings.Repeat("x", 1<<20)
	rev := uint64(0)
	for range 6 {
		rev = mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "big", ExpectedRevision: rev, AppendMessages: []*savepointv1.Message{userMsg(big)}}).Revision
	}
	res, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "big"})
	if err != nil {
		t.Fatal(err)
	}
	got := len(res.Checkpoint.Messages)
	if got == 0 || got == 6 || res.NextPageToken == "" {
		t.Fatalf("first page holds %d of 6 messages, token %q", got, res.NextPageToken)
	}
	token := res.NextPageToken
	for token != "" {
		page, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: "big", PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if page.FirstIndex != uint64(got) {
			t.Fatalf("page starts at %d, want %d", page.FirstIndex, got)
		}
		got += len(page.Messages)
		token = page.NextPageToken
	}
	if got != 6 {
		t.Fatalf("paged %d messages, want 6", got)
	}
	// A token is bound to its session.
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "other"})
	_, err = c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: "other", PageToken: res.NextPageToken})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
}

func TestDamagedValueIsDataLossForThatSessionAlone(t *testing.T) {
	d := daemontest.Start(t)
	for _, sid := range []string{"bad", "good"} {
		mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: sid, AppendMessages: []*savepointv1.Message{userMsg(sid)}})
	}
	d.Kill()
	// Flip the last byte of every value whose key names the session "bad".
	db, err := badger.Open(badger.DefaultOptions(d.DataDir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		var keys [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().KeyCopy(nil); strings.HasPrefix(string(k[1:]), "bad\x00") {
				keys = append(keys, k)
			}
		}
		it.Close()
		for _, k := range keys {
			item, err := txn.Get(k)
			if err != nil {
				return err
			}
			v, _ := item.ValueCopy(nil)
			v[len(v)-1] ^= 0x55
			if err := txn.Set(k, v); err != nil {
				return err
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("no keys of session bad")
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	d.Restart()
	_, err = d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "bad"})
	wantReason(t, err, codes.DataLoss, "CHECKPOINT_CORRUPT")
	_, err = d.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "bad"})
	wantReason(t, err, codes.DataLoss, "CHECKPOINT_CORRUPT")
	if _, err := d.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "good"}); err != nil {
		t.Fatalf("good session: %v", err)
	}
	// One verification routine, two ways: the Verify RPC while the daemon
	// runs, and "savepointd verify" while it is stopped.
	rep, err := d.Client.Verify(ctx, &savepointv1.VerifyRequest{})
	if err != nil || len(rep.DamagedSessions) != 1 || rep.DamagedSessions[0].SessionId != "bad" || rep.CheckedSessions != 2 {
		t.Fatalf("Verify RPC: %v %v", rep, err)
	}
	d.Stop()
	out, err := exec.Command(d.Bin, "verify", "--data-dir", d.DataDir).Output()
	var exit *exec.ExitError
	var offline savepointv1.VerifyResponse
	if !errors.As(err, &exit) || exit.ExitCode() != 4 || protojson.Unmarshal(out, &offline) != nil || !proto.Equal(&offline, rep) {
		t.Fatalf("savepointd verify: %v\n%s", err, out)
	}
	d.Restart()
	if _, err := d.Client.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: "bad"}); err != nil {
		t.Fatalf("deleting the damaged session: %v", err)
	}
	d.Stop()
	if out, err := exec.Command(d.Bin, "verify", "--data-dir", d.DataDir).CombinedOutput(); err != nil {
		t.Fatalf("savepointd verify after the delete: %v\n%s", err, out)
	}
}

func TestSecondDaemonOnSameDataDirExits(t *testing.T) {
	d := daemontest.Start(t)
	cmd := exec.Command(d.Bin, "--data-dir", d.DataDir, "--listen", "unix:"+daemontest.SocketPath(t))
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 || !strings.Contains(string(out), "savepointd.lock") {
		t.Fatalf("second daemon: exit %v, output %s", err, out)
	}
	// The first still serves.
	mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: "still"})
}

func TestStaleSocketReplacedAndSIGTERMStops(t *testing.T) {
	d := daemontest.Start(t)
	d.Kill() // leaves the socket file behind
	if _, err := os.Stat(d.Socket); err != nil {
		t.Fatalf("no stale socket to replace: %v", err)
	}
	d.Restart()
	fi, err := os.Stat(d.Socket)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: "s"})
	start := time.Now()
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM exit code %d\n%s", code, d.Stderr())
	}
	if time.Since(start) > 15*time.Second {
		t.Fatalf("stop took %v", time.Since(start))
	}
}

// TestDiskFullDaemon fills a small tmpfs under a running savepointd: saves
// are answered RESOURCE_EXHAUSTED DISK_FULL before Badger can die of SIGBUS,
// the daemon stays up and serves reads, and saves work again once space is
// freed.
func TestDiskFullDaemon(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); badgerstore's TestDiskGuard covers the guard with a fake statfs", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	const reserve = 160 << 20
	d := daemontest.Start(t, "--disk-reserve-bytes", fmt.Sprint(reserve))
	d.Kill()
	d.DataDir = filepath.Join(mnt, "data")
	d.Restart()
	mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: "full", AppendMessages: []*savepointv1.Message{userMsg("kept")}})

	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, free-reserve+(1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "full", ExpectedRevision: 1, AppendMessages: []*savepointv1.Message{userMsg("refused")}})
	wantReason(t, err, codes.ResourceExhausted, "DISK_FULL")
	g, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "full"})
	if err != nil || g.Checkpoint.Revision != 1 || !proto.Equal(g.Checkpoint.Messages[0], userMsg("kept")) {
		t.Fatalf("read while the disk is full: %v %v", g, err)
	}
	os.Remove(filler)
	mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: "full", ExpectedRevision: 1, AppendMessages: []*savepointv1.Message{userMsg("after")}})
	if code := d.Stop(); code != 0 {
		t.Fatalf("savepointd exited %d\n%s", code, d.Stderr())
	}
}

// TestReconcilePaging reconciles three recorded effects of 1.9 MiB each with
// a client left at gRPC's default 4 MiB receive limit: the resolutions come
// in pages, and a token outlives no save.
func TestReconcilePaging(t *testing.T) {
	c := daemontest.Start(t).Client
	var calls []*savepointv1.ToolUse
	for i := range 3 {
		calls = append(calls, &savepointv1.ToolUse{ToolUseId: fmt.Sprint("t", i), Name: "fetch", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY})
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "big", PendingToolUses: calls})
	big := strings.Repeat("o", 1900<<10)
	for _, call := range calls {
		if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "big", ToolUseId: call.ToolUseId, Output: big}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var first string
	for token := ""; ; {
		resp, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "big", PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Resolutions) == 0 {
			t.Fatal("an empty page")
		}
		for _, r := range resp.Resolutions {
			if r.Decision != savepointv1.Decision_DECISION_REUSE || r.Effect.GetOutput() != big {
				t.Fatalf("%s: %v with %d bytes", r.ToolUse.ToolUseId, r.Decision, len(r.Effect.GetOutput()))
			}
			got = append(got, r.ToolUse.ToolUseId)
		}
		if first == "" {
			first = resp.NextPageToken
		}
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if strings.Join(got, ",") != "t0,t1,t2" || first == "" {
		t.Fatalf("paged resolutions %v (first token %q)", got, first)
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "big", ExpectedRevision: 1})
	_, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "big", PageToken: first})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
}
