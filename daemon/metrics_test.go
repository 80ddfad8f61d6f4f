package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// metricsAddr returns the address the daemon's log says it serves metrics on.
func metricsAddr(t *testing.T, logs string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "serving metrics" {
			return m["metrics_addr"].(string)
		}
	}
	t.Fatalf("no 'serving metrics' line in:\n%s", logs)
	return ""
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of the series of family name whose labels include
// labels (a counter, gauge, or a histogram's count); ok is false when there
// is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, want := range labels {
			if have[k] != want {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetrics makes a known set of calls and checks every series they move.
func TestMetrics(t *testing.T) {
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0)
	socket := daemontest.SocketPath(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket, MetricsAddr: "127.0.0.1:0"}, logger)
	addr := metricsAddr(t, logs.String())
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
	res, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "b", ExpectedRevision: 1}) // epoch 0 after a Resume
	wantReason(t, err, codes.Aborted, "SESSION_FENCED")
	if _, err := c.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: "b", Epoch: res.Epoch}); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, addr)
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
		{"savepoint_sessions", nil, 1}, // b was deleted
	} {
		labels := tt.labels
		if labels["grpc_code"] == "" && tt.name == "grpc_server_handling_seconds" {
			delete(labels, "grpc_code")
		}
		got, ok := value(fams, tt.name, labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// Store series: every acknowledged write went through a commit and a sync.
	commits, _ := value(fams, "savepoint_store_commits_total", nil)
	batches, _ := value(fams, "savepoint_store_commit_batch_requests", nil)
	syncs, _ := value(fams, "savepoint_store_sync_seconds", nil)
	requests, _ := value(fams, "savepoint_store_write_requests_total", nil)
	if commits < 1 || batches != commits || syncs != commits || requests < commits {
		t.Errorf("commits %v, batch observations %v, syncs %v, write requests %v: want batches = syncs = commits <= requests", commits, batches, syncs, requests)
	}
	if wal, ok := value(fams, "savepoint_store_file_bytes", map[string]string{"kind": "wal"}); !ok || wal <= 0 {
		t.Errorf("wal bytes %v (present %v), want > 0", wal, ok)
	}
	for _, kind := range []string{"lsm", "vlog"} {
		if _, ok := value(fams, "savepoint_store_file_bytes", map[string]string{"kind": kind}); !ok {
			t.Errorf("no savepoint_store_file_bytes{kind=%q}", kind)
		}
	}
	if _, ok := value(fams, "go_goroutines", nil); !ok {
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
