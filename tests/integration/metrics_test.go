package integration_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestMetrics makes a known set of calls and checks every series they move.
func TestMetrics(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0)
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket, MetricsAddr: "127.0.0.1:0"}, logger)
	addr := daemontest.MetricsAddr(t, logs.String())
	c, _ := dialUnix(t, socket)

	se := savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
	saves := []*savepointv1.SaveCheckpointRequest{
		{SessionId: "a", AppendMessages: []*savepointv1.Message{userMsg("hello")}},
		{SessionId: "b", StateJson: `{"n":1}`},
		{SessionId: "a", ExpectedRevision: 1, PendingToolUses: []*savepointv1.ToolUse{
			{ToolUseId: "done", Name: "w", EffectClass: se}, {ToolUseId: "begun", Name: "w", EffectClass: se, BeginTracked: true}}},
	}
	var savedBytes int
	for _, r := range saves {
		mustSave(t, c, r)
		savedBytes += proto.Size(r)
	}
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "a", ToolUseId: "done", Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "a", ToolUseId: "done", Output: "ok"}); err != nil {
		t.Fatal(err) // a repeat: no new ledger entry
	}
	if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "a", ToolUseId: "begun"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "a"}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the repeat is not counted
		if _, err := c.ResolveEffect(ctx, &savepointv1.ResolveEffectRequest{SessionId: "a", ToolUseId: "begun", Output: "sent",
			Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE, ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON}); err != nil {
			t.Fatal(err)
		}
	}
	// A graph thread's call: begun (run), begun again after a crash (in
	// doubt), resolved done by a verify hook, begun again (reuse).
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := savepointv1.NewGraphCheckpointServiceClient(conn)
	begin := &savepointv1.BeginThreadEffectRequest{ThreadId: "t", ToolUseId: "call_1", Name: "w", EffectClass: se}
	for range 2 {
		if _, err := g.BeginThreadEffect(ctx, begin); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.ResolveThreadEffect(ctx, &savepointv1.ResolveThreadEffectRequest{ThreadId: "t", ToolUseId: "call_1",
		Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE, Output: &savepointv1.TypedValue{Type: "json", Data: []byte(`"ok"`)},
		ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_VERIFY}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.BeginThreadEffect(ctx, begin); err != nil {
		t.Fatal(err)
	}
	if b, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "a", ToolUseId: "wait", RequiresApproval: true,
		ToolUse: &savepointv1.ToolUse{Name: "pay", InputJson: `{"n":1}`}}); err != nil || b.GetDecision() != savepointv1.Decision_DECISION_AWAIT_APPROVAL {
		t.Fatalf("begin of a call that requires approval: %v %v", b, err)
	}
	for range 2 { // the repeat is not counted
		if _, err := c.ApproveEffect(ctx, &savepointv1.ApproveEffectRequest{SessionId: "a", ToolUseId: "wait",
			Decision: savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED, Note: "no"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "b", ExpectedRevision: 1}) // epoch 0 after a Resume
	wantReason(t, err, codes.Aborted, "SESSION_FENCED")
	if _, err := c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: "b", Epoch: res.Epoch}); err != nil {
		t.Fatal(err)
	}

	fams := daemontest.Scrape(t, addr)
	method := func(m, code string) map[string]string {
		return map[string]string{"grpc_service": "savepoint.v1.SavepointService", "grpc_method": m, "grpc_code": code}
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_handled_total", method("SaveCheckpoint", "OK"), 3},
		{"grpc_server_handled_total", method("SaveCheckpoint", "Aborted"), 1},
		{"grpc_server_handled_total", method("RecordEffect", "OK"), 2},
		{"grpc_server_handled_total", method("Verify", "OK"), 0}, // initialised, never called
		{"grpc_server_handling_seconds", method("SaveCheckpoint", ""), 4},
		{"grpc_server_started_total", map[string]string{"grpc_method": "Reconcile"}, 1},
		{"savepoint_saved_bytes_total", nil, float64(savedBytes)},
		{"savepoint_ledger_entries_recorded_total", nil, 1},
		{"savepoint_fenced_writes_total", nil, 1},
		{"savepoint_reconcile_resolutions_total", map[string]string{"decision": "reuse"}, 1},
		{"savepoint_reconcile_resolutions_total", map[string]string{"decision": "in_doubt"}, 1},
		{"savepoint_reconcile_resolutions_total", map[string]string{"decision": "run"}, 0},
		{"savepoint_effects_resolved_total", map[string]string{"resolver": "person", "outcome": "done"}, 1},
		{"savepoint_effects_resolved_total", map[string]string{"resolver": "verify", "outcome": "not_done"}, 0},
		{"savepoint_effects_resolved_total", map[string]string{"resolver": "verify", "outcome": "done"}, 1}, // the thread's
		{"savepoint_thread_effect_begins_total", map[string]string{"decision": "run"}, 1},
		{"savepoint_thread_effect_begins_total", map[string]string{"decision": "in_doubt"}, 1},
		{"savepoint_thread_effect_begins_total", map[string]string{"decision": "reuse"}, 1},
		{"savepoint_effect_approvals_total", map[string]string{"decision": "denied"}, 1},
		{"savepoint_effect_approvals_total", map[string]string{"decision": "approved"}, 0},
		{"savepoint_sessions", nil, 1}, // b was deleted
	} {
		labels := tt.labels
		if labels["grpc_code"] == "" && tt.name == "grpc_server_handling_seconds" {
			delete(labels, "grpc_code")
		}
		got, ok := daemontest.Value(fams, tt.name, labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// Store series: every acknowledged write went through a commit and a sync.
	commits, _ := daemontest.Value(fams, "savepoint_store_commits_total", nil)
	batches, _ := daemontest.Value(fams, "savepoint_store_commit_batch_requests", nil)
	syncs, _ := daemontest.Value(fams, "savepoint_store_sync_seconds", nil)
	requests, _ := daemontest.Value(fams, "savepoint_store_write_requests_total", nil)
	if commits < 1 || batches != commits || syncs != commits || requests < commits {
		t.Errorf("commits %v, batch observations %v, syncs %v, write requests %v: want batches = syncs = commits <= requests", commits, batches, syncs, requests)
	}
	if wal, ok := daemontest.Value(fams, "savepoint_store_file_bytes", map[string]string{"kind": "wal"}); !ok || wal <= 0 {
		t.Errorf("wal bytes %v (present %v), want > 0", wal, ok)
	}
	for _, kind := range []string{"lsm", "vlog"} {
		if _, ok := daemontest.Value(fams, "savepoint_store_file_bytes", map[string]string{"kind": kind}); !ok {
			t.Errorf("no savepoint_store_file_bytes{kind=%q}", kind)
		}
	}
	if _, ok := daemontest.Value(fams, "go_goroutines", nil); !ok {
		t.Error("no Go runtime series")
	}

	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("/debug/pprof/: %d %.200s", resp.StatusCode, body)
	}
}

// TestNoMetricsByDefault: without --metrics-addr nothing is served.
func TestNoMetricsByDefault(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + daemontest.SocketPath(t)}, logger)
	if strings.Contains(logs.String(), "serving metrics") {
		t.Errorf("metrics served without --metrics-addr:\n%s", logs)
	}
}
