package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/internal/version"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the commands' output")

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	keyRE  = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
)

// normalize replaces what differs between runs: the socket, times, random
// idempotency keys and the build's version.
func normalize(s, socket string) string {
	s = strings.ReplaceAll(s, socket, "SOCKET")
	s = timeRE.ReplaceAllString(s, "TIME")
	s = keyRE.ReplaceAllString(s, "KEY")
	if v := version.String(); v != "" {
		s = strings.ReplaceAll(s, `"`+v+`"`, `"VERSION"`)
		s = regexp.MustCompile(`(?m)^(version +)`+regexp.QuoteMeta(v)+`$`).ReplaceAllString(s, "${1}VERSION")
	}
	return s
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// seed makes the sessions the golden files show, through the raw API:
//
//   - report-1: three revisions, two turns; the second names six tool uses
//     that Reconcile decides every way it can (REUSE, RUN three ways,
//     IN_DOUBT begun and untracked);
//   - notes-2: one revision, nothing pending, no labels.
func seed(t *testing.T, raw savepointv1.SavepointServiceClient) {
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
		SessionId: "report-1", Task: "Write the weekly report", Labels: labels,
		AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `[{"type":"text","text":"Write the weekly report to report.md.\nKeep it short."}]`},
			{Role: "assistant", ContentJson: `[{"type":"text","text":"Reading the notes first."},{"type":"tool_use","id":"toolu_00","name":"read_notes","input":{"path":"notes.txt"}}]`},
		},
		Turn:            1,
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "toolu_00", Name: "read_notes", InputJson: `{"path":"notes.txt"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY}},
	}))
	calls := []*savepointv1.ToolUse{
		{ToolUseId: "toolu_01", Name: "write_report", InputJson: `{"path": "report.md"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true},
		{ToolUseId: "toolu_02", Name: "send_email", InputJson: `{"to":"team@example.com"}`, BeginTracked: true},
		{ToolUseId: "toolu_03", Name: "post_slack", InputJson: `{"channel":"#reports"}`, BeginTracked: true},
		{ToolUseId: "toolu_04", Name: "delete_draft"},
		{ToolUseId: "toolu_05", Name: "read_calendar", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY},
		{ToolUseId: "toolu_06", Name: "charge_card", InputJson: `{"cents":500}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT, BeginTracked: true},
	}
	var blocks []string
	for _, c := range calls {
		in := c.InputJson
		if in == "" {
			in = "{}"
		}
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, c.ToolUseId, c.Name, in))
	}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "report-1", ExpectedRevision: 1, Task: "Write the weekly report", Labels: labels,
		Turn: 2, TokensUsed: 1200, StateJson: `{"step": 2}`,
		AppendMessages: []*savepointv1.Message{
			{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"toolu_00","content":"Q3: 12 deals closed, 3 lost."}]`},
			{Role: "assistant", ContentJson: "[" + strings.Join(blocks, ",") + "]"},
		},
		PendingToolUses: calls,
	}))
	for _, id := range []string{"toolu_01", "toolu_02", "toolu_06"} {
		must(raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "report-1", ToolUseId: id}))
	}
	must(raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "report-1", ToolUseId: "toolu_01", Output: "wrote report.md\n3 sections, 41 lines"}))
	// pay-3: two calls of a tool that requires approval, both waiting.
	payCalls := []*savepointv1.ToolUse{
		{ToolUseId: "toolu_p1", Name: "send_payment", InputJson: `{"cents": 900}`, BeginTracked: true},
		{ToolUseId: "toolu_p2", Name: "send_payment", InputJson: `{"cents": 90000}`, BeginTracked: true},
	}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "pay-3", Task: "Pay the invoices", Labels: map[string]string{"team": "pay"},
		AppendMessages:  []*savepointv1.Message{{Role: "user", ContentJson: `"Pay the two invoices."`}},
		PendingToolUses: payCalls,
	}))
	for _, c := range payCalls {
		must(raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay-3", ToolUseId: c.ToolUseId, RequiresApproval: true}))
	}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "notes-2", Task: "Summarise the notes",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"Summarise notes.txt"`}},
	}))
}

// seedThread makes the graph thread agent-7 the golden files show: two
// checkpoints, one with a pending write, and a ledger of one call of each
// kind: a side-effecting call recorded (REUSE), one begun without an
// outcome (IN_DOUBT), a read-only one begun without an outcome (RUN), and
// one whose attempt raised (RUN, attempt 2), one in a subgraph.
func seedThread(t *testing.T, g savepointv1.GraphCheckpointServiceClient) {
	t.Helper()
	ctx := t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	value := func(typ, data string) *savepointv1.TypedValue {
		return &savepointv1.TypedValue{Type: typ, Data: []byte(data)}
	}
	for i, id := range []string{"1ef-a", "1ef-b"} {
		parent := ""
		if i > 0 {
			parent = "1ef-a"
		}
		must(g.PutCheckpoint(ctx, &savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{
			ThreadId: "agent-7", CheckpointId: id, ParentCheckpointId: parent, Checkpoint: value("json", `{"v":4}`),
			MetadataJson: fmt.Sprintf(`{"source": "loop", "step": %d}`, i),
		}}))
	}
	must(g.PutWrites(ctx, &savepointv1.PutWritesRequest{ThreadId: "agent-7", CheckpointId: "1ef-b", TaskId: "task-1",
		Writes: []*savepointv1.ChannelWrite{{Channel: "messages", Value: value("json", `[]`)}}}))
	begin := func(ns, id, name, input string, class savepointv1.EffectClass) {
		t.Helper()
		must(g.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "agent-7", CheckpointNs: ns, ToolUseId: id,
			Name: name, InputJson: input, EffectClass: class, CheckpointId: "1ef-b"}))
	}
	record := func(ns, id, out string, isError bool) {
		t.Helper()
		must(g.RecordThreadEffect(ctx, &savepointv1.RecordThreadEffectRequest{ThreadId: "agent-7", CheckpointNs: ns, ToolUseId: id,
			Attempt: 1, Output: value("json", out), IsError: isError}))
	}
	begin("", "call_1", "send_invoice", `{"to": "acme", "cents": 1200}`, savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT)
	record("", "call_1", `"invoice 881 sent"`, false)
	begin("", "call_2", "charge_card", `{"cents": 1200}`, savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED)
	begin("", "call_3", "get_weather", `{"city": "Oslo"}`, savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY)
	begin("research:1", "call_1", "fetch_page", `{"url": "https://example.com"}`, savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT)
	record("research:1", "call_1", `"timeout after 30s"`, true)
	must(g.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "agent-7", ToolUseId: "call_5",
		Name: "wire_money", InputJson: `{"cents": 5000}`, CheckpointId: "1ef-b", RequiresApproval: true}))
}

// The golden files hold each command's output against a seeded daemon, in
// the order of this table (rm last, since it changes what ls shows).
func TestGolden(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	seedThread(t, savepointv1.NewGraphCheckpointServiceClient(d.Conn))
	addr := "unix:" + d.Socket
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"help", []string{"help"}},
		{"help-show", []string{"help", "show"}},
		{"help-rm", []string{"rm", "--help"}},
		{"help-complete", []string{"help", "complete"}},
		{"ls", []string{"ls"}},
		{"ls-label", []string{"ls", "--label", "team=infra"}},
		{"ls-pending", []string{"ls", "--pending"}},
		{"ls-idle", []string{"ls", "--idle", "1h"}},
		{"show", []string{"show", "report-1"}},
		{"show-revision", []string{"show", "report-1", "--revision", "1"}},
		{"show-notfound", []string{"show", "nope"}},
		{"show-revision-notfound", []string{"show", "--revision", "9", "report-1"}},
		{"export", []string{"export", "report-1"}},
		{"export-revision", []string{"export", "report-1", "--revision", "1"}},
		{"info", []string{"info"}},
		{"verify", []string{"verify"}},
		{"effects", []string{"effects", "report-1"}},
		{"effects-notfound", []string{"effects", "nope"}},
		{"effects-thread", []string{"effects", "--thread", "agent-7"}},
		{"show-thread", []string{"show", "--thread", "agent-7"}},
		{"show-thread-notfound", []string{"show", "--thread", "nope"}},
		{"help-resolve", []string{"help", "resolve"}},
		{"resolve-done", []string{"resolve", "report-1", "toolu_02", "--done", "--output", "sent to team@example.com", "--note", "in the mail log", "--by", "alice"}},
		{"resolve-again", []string{"resolve", "report-1", "toolu_02", "--done", "--output", "sent to team@example.com", "--by", "bob"}},
		{"resolve-conflict", []string{"resolve", "report-1", "toolu_02", "--not-done", "--by", "bob"}},
		{"resolve-not-done", []string{"resolve", "report-1", "toolu_04", "--not-done", "--by", "alice"}},
		{"resolve-not-in-doubt", []string{"resolve", "report-1", "toolu_03", "--done", "--by", "alice"}},
		{"resolve-unknown", []string{"resolve", "report-1", "toolu_99", "--not-done"}},
		{"show-resolved", []string{"show", "report-1"}},
		{"effects-resolved", []string{"effects", "report-1"}},
		{"ls-resolved", []string{"ls", "--label", "team=infra"}},
		{"resolve-thread", []string{"resolve", "--thread", "agent-7", "call_2", "--done", "--output", "charged 12 EUR", "--by", "alice"}},
		{"resolve-thread-not-in-doubt", []string{"resolve", "--thread", "agent-7", "--ns", "research:1", "call_1", "--not-done", "--by", "alice"}},
		{"effects-thread-resolved", []string{"effects", "--thread", "agent-7"}},
		{"show-thread-resolved", []string{"show", "--thread", "agent-7"}},
		{"ls-threads", []string{"ls", "--threads"}},
		{"help-approve", []string{"help", "approve"}},
		{"ls-awaiting", []string{"ls", "--label", "team=pay"}},
		{"approve", []string{"approve", "pay-3", "toolu_p1", "--note", "checked the amount", "--by", "alice"}},
		{"approve-again", []string{"approve", "pay-3", "toolu_p1", "--by", "bob"}},
		{"approve-conflict", []string{"approve", "pay-3", "toolu_p1", "--deny", "--by", "bob"}},
		{"approve-deny", []string{"approve", "pay-3", "toolu_p2", "--deny", "--note", "over the limit; ask finance", "--by", "alice"}},
		{"approve-other-input", []string{"approve", "pay-3", "toolu_p2", "--digest", strings.Repeat("0", 64)}},
		{"approve-not-waiting", []string{"approve", "report-1", "toolu_01", "--by", "alice"}},
		{"effects-approval", []string{"effects", "pay-3"}},
		{"ls-approved", []string{"ls", "--label", "team=pay"}},
		{"show-approval", []string{"show", "pay-3"}},
		{"approve-thread", []string{"approve", "--thread", "agent-7", "call_5", "--by", "alice"}},
		{"effects-thread-approval", []string{"effects", "--thread", "agent-7"}},
		{"export-thread", []string{"export", "--thread", "agent-7"}},
		{"help-backup", []string{"help", "backup"}},
		{"help-fork", []string{"help", "fork"}},
		{"help-rewind", []string{"rewind", "--help"}},
		{"fork", []string{"fork", "report-1", "report-1-retry", "--revision", "1"}},
		{"fork-exists", []string{"fork", "report-1", "notes-2"}},
		{"show-fork", []string{"show", "report-1-retry"}},
		{"rewind-stale-epoch", []string{"rewind", "report-1", "--revision", "1", "--epoch", "3"}},
		{"rewind", []string{"rewind", "report-1", "--revision", "1", "--epoch", "0"}},
		{"rewind-notkept", []string{"rewind", "report-1", "--revision", "9", "--take-over"}},
		{"complete-stale-epoch", []string{"complete", "notes-2", "--epoch", "7"}},
		{"complete", []string{"complete", "notes-2", "--epoch", "0", "--output", "3 notes summarised"}},
		{"complete-again", []string{"complete", "notes-2", "--output", "3 notes summarised", "--take-over"}},
		{"complete-conflict", []string{"complete", "notes-2", "--epoch", "1", "--failed"}},
		{"ls-completed", []string{"ls", "--status", "completed"}},
		{"show-completed", []string{"show", "notes-2"}},
		{"ls-active", []string{"ls", "--status", "active"}},
		{"rm-stale-epoch", []string{"rm", "notes-2", "--epoch", "7"}},
		{"rm", []string{"rm", "notes-2", "--epoch", "0"}},
		{"rm-notfound", []string{"rm", "notes-2", "--take-over"}},
		{"show-deleted", []string{"show", "notes-2"}},
		{"ls-after-rm", []string{"ls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.args[0] != "help" && !strings.Contains(strings.Join(args, " "), "--help") {
				args = append([]string{"--addr", addr}, args...)
			}
			r := runCLI(t, args...)
			var b strings.Builder
			fmt.Fprintf(&b, "$ savepoint %s\n%s", strings.Join(tc.args, " "), r.stdout)
			if r.stderr != "" {
				fmt.Fprintf(&b, "[stderr]\n%s", r.stderr)
			}
			fmt.Fprintf(&b, "[exit %d]\n", r.code)
			checkGolden(t, tc.name, normalize(b.String(), d.Socket))
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the one line on stderr
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `savepoint: unknown command "frobnicate" (see 'savepoint help')`},
		{[]string{"--bogus", "ls"}, "savepoint: flag provided but not defined: -bogus"},
		{[]string{"ls", "--bogus"}, "savepoint: ls: flag provided but not defined: -bogus (see 'savepoint help ls')"},
		{[]string{"ls", "extra"}, `savepoint: ls: ls takes no arguments, got "extra"`},
		{[]string{"ls", "--label", "novalue"}, `want KEY=VALUE, not "novalue"`},
		{[]string{"show"}, "savepoint: show: missing SESSION"},
		{[]string{"show", "a", "b"}, "savepoint: show: want one SESSION, got 2 arguments"},
		{[]string{"show", "a", "--revision", "x"}, `invalid value "x" for flag -revision`},
		{[]string{"show", "a", "--thread", "t"}, "savepoint: show: give SESSION or --thread, not both"},
		{[]string{"show", "--revision", "2", "--thread", "t"}, "savepoint: show: --revision is a session's"},
		{[]string{"effects", "a", "--thread", "t"}, "savepoint: effects: give SESSION or --thread, not both"},
		{[]string{"export"}, "savepoint: export: missing SESSION"},
		{[]string{"rm", "a"}, "savepoint: rm: a write needs --epoch N"},
		{[]string{"rm", "a", "--epoch", "1", "--take-over"}, "savepoint: rm: give --epoch or --take-over, not both"},
		{[]string{"rm", "a", "--epoch", "one"}, `want an epoch number, not "one"`},
		{[]string{"complete", "a"}, "savepoint: complete: a write needs --epoch N"},
		{[]string{"effects"}, "savepoint: effects: missing SESSION"},
		{[]string{"backup", "out.bak"}, `savepoint: backup: backup takes no arguments, got "out.bak"`},
		{[]string{"fork", "a"}, "savepoint: fork: want SESSION NEW_SESSION, got 1 argument ("},
		{[]string{"rewind", "a", "--epoch", "1"}, "savepoint: rewind: rewind needs --revision N"},
		{[]string{"rewind", "a", "--revision", "1"}, "savepoint: rewind: a write needs --epoch N"},
		{[]string{"complete"}, "savepoint: complete: missing SESSION"},
		{[]string{"resolve", "a"}, "savepoint: resolve: want SESSION TOOL_USE_ID, got 1 arguments"},
		{[]string{"ls", "--threads", "--status", "active"}, "savepoint: ls: --threads takes none of --label, --status, --pending, --idle and --watch"},
		{[]string{"approve", "a"}, "savepoint: approve: want SESSION TOOL_USE_ID, got 1 arguments"},
		{[]string{"approve", "--thread", "th", "a", "t"}, "savepoint: approve: with --thread, want TOOL_USE_ID, got 2 arguments"},
		{[]string{"approve", "--ns", "n", "a", "t"}, "savepoint: approve: --ns goes with --thread only"},
		{[]string{"approve", "a", "t", "--digest", "xyz"}, "savepoint: approve: --digest wants the 64 hex digits of an input digest"},
		{[]string{"resolve", "a", "t"}, "savepoint: resolve: give --done or --not-done"},
		{[]string{"resolve", "--thread", "th", "a", "t", "--done"}, "savepoint: resolve: with --thread, want TOOL_USE_ID, got 2 arguments"},
		{[]string{"resolve", "--ns", "n", "a", "t", "--done"}, "savepoint: resolve: --ns goes with --thread only"},
		{[]string{"resolve", "a", "t", "--done", "--not-done"}, "savepoint: resolve: give --done or --not-done"},
		{[]string{"resolve", "a", "t", "--not-done", "--output", "x"}, "savepoint: resolve: --output, --output-file and --error go with --done only"},
		{[]string{"resolve", "a", "t", "--done", "--output", "x", "--output-file", "f"}, "savepoint: resolve: give --output or --output-file, not both"},
		{[]string{"ls", "--status", "done"}, `savepoint: ls: --status wants active, completed or failed, not "done"`},
		{[]string{"ls", "--status", "unspecified"}, `--status wants active, completed or failed`},
		{[]string{"ls", "--idle", "-1m"}, "savepoint: ls: --idle must not be negative"},
		{[]string{"ls", "--idle", "soon"}, `invalid value "soon" for flag -idle`},
		{[]string{"verify", "x"}, `savepoint: verify: verify takes no arguments`},
		{[]string{"info", "x"}, `savepoint: info: info takes no arguments`},
		{[]string{"--timeout", "0s", "ls"}, "savepoint: ls: --timeout must be positive, not 0s"},
		{[]string{"ls", "--addr", "nonsense"}, `savepoint: ls: --addr: address "nonsense" is neither unix:PATH nor HOST:PORT`},
		{[]string{"help", "nope"}, `savepoint: help: no command "nope"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// No daemon: a usage error is found before any call.
			r := runCLI(t, append([]string{"--addr", "unix:/nonexistent/s.sock"}, tc.args...)...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d (usage)", r.code, exitUsage)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tc.want)
			}
			if tc.args != nil && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q is not one line", r.stderr)
			}
		})
	}
}

func TestUnreachableDaemon(t *testing.T) {
	r := runCLI(t, "--addr", "unix:/nonexistent/s.sock", "ls")
	if r.code != exitUnavailable || !strings.HasPrefix(r.stderr, "savepoint: ls: cannot reach savepointd at unix:/nonexistent/s.sock: ") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want %d and one line naming the address", r.code, r.stderr, exitUnavailable)
	}
}

func TestTimeout(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	r := runCLI(t, "--addr", "unix:"+d.Socket, "--timeout", "1ns", "info")
	if r.code != exitUnavailable || !strings.HasPrefix(r.stderr, "savepoint: info: no answer within --timeout from savepointd at unix:") {
		t.Errorf("exit %d, stderr %q; want %d naming the timeout", r.code, r.stderr, exitUnavailable)
	}
}

// Without --addr the CLI resolves the address as every client does.
func TestDefaultAddress(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	t.Setenv(client.EnvAddr, "unix:"+d.Socket)
	r := runCLI(t, "ls")
	if r.code != exitOK || !strings.Contains(r.stdout, "report-1") {
		t.Errorf("ls via $%s: exit %d, stdout %q, stderr %q", client.EnvAddr, r.code, r.stdout, r.stderr)
	}
}

// Flags are accepted before and after the session, and before the command.
func TestFlagPlacement(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	seedThread(t, savepointv1.NewGraphCheckpointServiceClient(d.Conn))
	addr := "unix:" + d.Socket
	want := runCLI(t, "--addr", addr, "show", "--revision", "1", "report-1")
	if want.code != exitOK {
		t.Fatalf("show: exit %d %s", want.code, want.stderr)
	}
	for _, args := range [][]string{
		{"show", "report-1", "--revision", "1", "--addr", addr},
		{"show", "--addr", addr, "report-1", "--revision=1"},
		{"--addr", addr, "show", "--revision", "1", "--", "report-1"},
	} {
		if got := runCLI(t, args...); got != want {
			t.Errorf("%q: %+v, want the output of the canonical order", args, got)
		}
	}
}

// rm --take-over resumes the session first, so it needs no epoch and the
// agent that ran it is fenced; a stale --epoch is refused with exit 6 and
// deletes nothing.
func TestRmTakeOverFencesTheAgent(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	addr := "unix:" + d.Socket
	ctx := t.Context()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	agent, err := c.Start(ctx, "busy", "work", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	// Another process resumes it: epoch 2. The agent's epoch 1 is stale.
	if _, err := c.Resume(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "--addr", addr, "rm", "busy", "--epoch", "1")
	if r.code != exitFenced || !strings.Contains(r.stderr, "SESSION_FENCED") || !strings.Contains(r.stderr, "--take-over") {
		t.Fatalf("rm with a stale epoch: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := c.GetSession(ctx, "busy", 0); err != nil {
		t.Fatalf("a refused rm deleted the session: %v", err)
	}
	r = runCLI(t, "--addr", addr, "rm", "--take-over", "busy")
	if r.code != exitOK || r.stdout != "deleted busy (tombstone epoch 3)\n" {
		t.Fatalf("rm --take-over: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Tombstone epoch 3: the take-over resumed (2 -> 3) before deleting.
	err = agent.PointA(ctx, client.Message{Role: "assistant", ContentJSON: `"done"`}, nil)
	if !errors.Is(err, client.ErrSessionFenced) && !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("the agent saved after rm --take-over: %v", err)
	}
	if _, err := c.GetSession(ctx, "busy", 0); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("after rm: %v, want ErrSessionNotFound", err)
	}
}

// export holds the whole history, however many ListMessages pages it takes,
// and every page of Reconcile's resolutions.
func TestExportPagesWholeHistory(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{MaxStateBytes: 1 << 10, ResponseBudgetBytes: 130 << 10})
	ctx := t.Context()
	const n = 400
	var msgs []*savepointv1.Message
	for i := range n {
		msgs = append(msgs, &savepointv1.Message{Role: "user", ContentJson: fmt.Sprintf("%q", fmt.Sprintf("%04d %s", i, strings.Repeat("x", 1000)))})
	}
	var pending []*savepointv1.ToolUse
	for i := range 3 {
		pending = append(pending, &savepointv1.ToolUse{ToolUseId: fmt.Sprintf("t%d", i), Name: "write"})
	}
	if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "long", AppendMessages: msgs, PendingToolUses: pending}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// Outputs of 100 KiB each: one resolution per Reconcile page.
		if _, err := d.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "long", ToolUseId: fmt.Sprintf("t%d", i), Output: strings.Repeat("o", 100<<10)}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "long"})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("the history fits one page (%v): the test pages nothing", err)
	}
	rec, err := d.Client.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "long"})
	if err != nil || rec.GetNextPageToken() == "" {
		t.Fatalf("the resolutions fit one page (%v): the test pages nothing", err)
	}
	r := runCLI(t, "--addr", "unix:"+d.Socket, "export", "long")
	if r.code != exitOK {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Checkpoint struct {
			MessageCount string
			Messages     []struct{ ContentJSON string }
		}
		Reconcile struct {
			Resolutions []struct{ Decision string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Checkpoint.Messages) != n || out.Checkpoint.MessageCount != fmt.Sprint(n) {
		t.Fatalf("exported %d messages (messageCount %s), want %d", len(out.Checkpoint.Messages), out.Checkpoint.MessageCount, n)
	}
	for i, m := range out.Checkpoint.Messages {
		if !strings.HasPrefix(m.ContentJSON, fmt.Sprintf(`"%04d `, i)) {
			t.Fatalf("message %d is %.10s...", i, m.ContentJSON)
		}
	}
	if len(out.Reconcile.Resolutions) != 3 {
		t.Fatalf("exported %d resolutions, want 3", len(out.Reconcile.Resolutions))
	}
	for _, res := range out.Reconcile.Resolutions {
		if res.Decision != "DECISION_REUSE" {
			t.Errorf("decision %s, want DECISION_REUSE", res.Decision)
		}
	}
}

// Every error a command returns maps to its documented exit code.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{usagef("x"), exitUsage},
		{errDamage, exitDamaged},
		{fmt.Errorf("wrapped: %w", client.ErrSessionNotFound), exitNotFound},
		{client.ErrRevisionNotFound, exitNotFound},
		{client.ErrCheckpointCorrupt, exitDamaged},
		{client.ErrSessionFenced, exitFenced},
		{client.ErrUnavailable, exitUnavailable},
		{context.DeadlineExceeded, exitUnavailable},
		{client.ErrInvalidArgument, exitFail},
		{errors.New("anything else"), exitFail},
	} {
		var errb bytes.Buffer
		a := newApp(&bytes.Buffer{}, &errb)
		if got := a.failAt("cmd", []string{"arg"}, "unix:/s", tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
		if !strings.HasPrefix(errb.String(), "savepoint: cmd") || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: stderr %q is not one savepoint: line", tc.err, errb.String())
		}
	}
}
