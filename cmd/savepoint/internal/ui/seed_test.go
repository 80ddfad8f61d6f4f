package ui

import (
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// inspector starts a real savepointd in-process with the seed sessions and
// an inspector on it; it returns the inspector's URL, a browser-like client
// holding the token cookie, and the daemon.
func inspector(t *testing.T, readOnly bool) (*Server, string, *http.Client, *daemontest.Daemon) {
	t.Helper()
	d := daemontest.Start(t)
	seedSessions(t, d.Client)
	c, err := client.Dial(t.Context(), "unix:"+d.Socket, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := New(Options{Client: c, Token: testToken, ReadOnly: readOnly, DaemonAddr: "unix:" + d.Socket})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(ts.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: cookieName(u.Host), Value: testToken}})
	return s, ts.URL, &http.Client{Jar: jar}, d
}

// seedSessions saves the sessions every page test reads:
//
//	report-1   revision 1 with a read-only call pending, revision 2 with
//	           six calls pending: toolu_01 recorded (reuse), toolu_02 begun
//	           and never recorded (in doubt), toolu_04 not begin-tracked
//	           (in doubt), toolu_03 begin-tracked, never begun (re-run)
//	notes-2    one message, nothing pending
//	done-3     completed with a final output
func seedSessions(t *testing.T, raw savepointv1.SavepointServiceClient) {
	t.Helper()
	ctx := t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"team": "infra"}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "report-1", Task: "Write the weekly report", Labels: labels, Turn: 1,
		AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `[{"type":"text","text":"Write the weekly report to report.md."}]`},
			{Role: "assistant", ContentJson: `[{"type":"text","text":"Reading the notes first."},{"type":"tool_use","id":"toolu_00","name":"read_notes","input":{"path":"notes.txt"}}]`},
		},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "toolu_00", Name: "read_notes", InputJson: `{"path":"notes.txt"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY}},
	}))
	calls := []*savepointv1.ToolUse{
		{ToolUseId: "toolu_01", Name: "write_report", InputJson: `{"path":"report.md"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true},
		{ToolUseId: "toolu_02", Name: "send_email", InputJson: `{"to":"team@example.com"}`, BeginTracked: true},
		{ToolUseId: "toolu_03", Name: "post_slack", InputJson: `{"channel":"#reports"}`, BeginTracked: true},
		{ToolUseId: "toolu_04", Name: "delete_draft"},
	}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "report-1", ExpectedRevision: 1, Task: "Write the weekly report", Labels: labels, Turn: 2, StateJson: `{"step":2}`,
		AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"toolu_00","content":"Q3: 12 deals closed, 3 lost."}]`},
			{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"toolu_01","name":"write_report","input":{"path":"report.md"}},{"type":"tool_use","id":"toolu_02","name":"send_email","input":{"to":"team@example.com"}},{"type":"tool_use","id":"toolu_03","name":"post_slack","input":{"channel":"#reports"}},{"type":"tool_use","id":"toolu_04","name":"delete_draft","input":{}}]`},
		},
		PendingToolUses: calls,
	}))
	for _, id := range []string{"toolu_01", "toolu_02"} {
		must(raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "report-1", ToolUseId: id}))
	}
	must(raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "report-1", ToolUseId: "toolu_01", Output: "wrote report.md"}))
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "notes-2", Task: "Summarise the notes",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"Summarise notes.txt"`}},
	}))
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "done-3", Task: "Say hello",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"Say hello"`}, {Role: "assistant", ContentJson: `"Hello."`}},
	}))
	must(raw.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{SessionId: "done-3", Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED, FinalOutput: "Hello."}))
}

// seedThread saves graph thread "thread-1": checkpoint 1 (a msgpack
// checkpoint value) and its child 2 with a msgpack channel value, a JSON
// channel value, a pickled one that must not be decoded, and a pending
// write of task "task-a".
func seedThread(t *testing.T, g savepointv1.GraphCheckpointServiceClient) {
	t.Helper()
	ctx := t.Context()
	// {"messages": ["hi"], "n": 3} in MessagePack.
	mp := []byte{0x82, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0x91, 0xa2, 'h', 'i', 0xa1, 'n', 0x03}
	for _, req := range []*savepointv1.PutCheckpointRequest{
		{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "thread-1", CheckpointId: "1", MetadataJson: `{"source":"input","step":-1}`,
			Checkpoint: &savepointv1.TypedValue{Type: "msgpack", Data: mp}}},
		{Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "thread-1", CheckpointId: "2", ParentCheckpointId: "1", MetadataJson: `{"source":"loop","step":0}`,
			ChannelVersions: map[string]string{"messages": "2", "plan": "1", "secret": "1"}},
			Blobs: []*savepointv1.ChannelBlob{
				{Channel: "messages", Version: "2", Value: &savepointv1.TypedValue{Type: "msgpack", Data: mp}},
				{Channel: "plan", Version: "1", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`{"steps":["draft","send"]}`)}},
				{Channel: "secret", Version: "1", Value: &savepointv1.TypedValue{Type: "pickle", Data: []byte("\x80\x04cos\nsystem\n")}},
			}},
	} {
		if _, err := g.PutCheckpoint(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "thread-1", CheckpointId: "2", TaskId: "task-a", TaskPath: "~__pregel_pull, agent",
		Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "messages", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`["tool call"]`)}}}}); err != nil {
		t.Fatal(err)
	}
	// The ledger: a recorded call (reuse) and one begun without an outcome
	// (in doubt).
	for _, id := range []string{"call_sent", "call_doubt"} {
		if _, err := g.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "thread-1", ToolUseId: id, Name: "send_email",
			InputJson: `{"to":"` + id + `"}`, CheckpointId: "2"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.RecordThreadEffect(ctx, &savepointv1.RecordThreadEffectRequest{ThreadId: "thread-1", ToolUseId: "call_sent", Attempt: 1,
		Output: &savepointv1.TypedValue{Type: "json", Data: []byte(`"sent #42"`)}}); err != nil {
		t.Fatal(err)
	}
}
