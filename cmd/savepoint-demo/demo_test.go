package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The seed's two transcripts, line for line: killed after the ledger write
// of turn 3, then resumed.
func TestSeedTranscript(t *testing.T) {
	_, addr := startDaemon(t)
	dir := workdir(t)
	o := runOpts{addr: addr, dir: dir, session: "seed-transcript", script: "seed", crash: "after-effect-write:3"}
	r := runDemo(t, o)
	want := `[turn 1][save A] pending=read_notes
[turn 1][save B]
[turn 2][save A] pending=count_words
[turn 2][save B]
[turn 3][save A] pending=write_report
[kill] simulated kill at after-effect-write:3
`
	if r.code != 137 || r.stdout != want {
		t.Errorf("killed run: %s\nwant exit 137 and:\n%s", r, want)
	}
	o.resume, o.crash = true, ""
	r = runDemo(t, o)
	want = `[resume] read turn=3 pending=write_report
[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger hit, reusing result, not re-running
[turn 3][save B] filled in this turn's tool result after resume
[done] Report written to report.txt, task complete.
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("resumed run: %s\nwant exit 0 and:\n%s", r, want)
	}
	if n := writes(t, dir); n != 1 {
		t.Errorf("report written %d times, want 1", n)
	}
	report, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil || string(report) != reportText {
		t.Errorf("report.txt: %q, %v", report, err)
	}
	checkCompleted(t, addr, "seed-transcript")

	// The other two reconcile lines of the seed.
	o = runOpts{addr: addr, dir: workdir(t), session: "seed-lines", script: "seed", crash: "after-tool:1"}
	runDemo(t, o)
	o.resume, o.crash = true, ""
	r = runDemo(t, o)
	if line := "[resume][reconcile] tool_use_id=toolu_01 name=read_notes ledger miss, read-only tool, re-running\n"; r.code != 0 || !strings.Contains(r.stdout, line) {
		t.Errorf("read-only re-run: %s\nwant the line %q", r, line)
	}
	o.resume, o.crash = false, "after-tool:3"
	runDemo(t, o)
	o.resume, o.crash = true, ""
	r = runDemo(t, o)
	line := "[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger miss with side effects, begun but not recorded: in doubt, not re-running, appending is_error\n"
	check := "[check] tool_use_id=toolu_03 name=write_report ended as is_error (in doubt or failed): check its effect by hand\n"
	if r.code != 0 || !strings.Contains(r.stdout, line) || !strings.HasSuffix(r.stdout, check) {
		t.Errorf("in doubt: %s\nwant the lines %q and %q", r, line, check)
	}

	// Nothing to resume from.
	r = runDemo(t, runOpts{addr: addr, dir: workdir(t), session: "never-started", script: "seed", resume: true})
	if r.code != 1 || !strings.Contains(r.stderr, `session "never-started" does not exist, run without --resume to start it`) {
		t.Errorf("resume of a missing session: %s", r)
	}
}

func TestFreshStart(t *testing.T) {
	_, addr := startDaemon(t)
	dir := filepath.Join(t.TempDir(), "new")
	o := runOpts{addr: addr, dir: dir, session: "fresh", script: "seed", crash: "after-save-b:3"}
	r := runDemo(t, o)
	if r.code != 137 || !strings.HasPrefix(r.stdout, "[setup] no sales-notes.txt in "+dir+": wrote a sample\n") {
		t.Fatalf("first run: %s", r)
	}
	if n := writes(t, dir); n != 1 {
		t.Fatalf("%d writes", n)
	}
	// Starting over (no --resume) replaces the session and empties the
	// write count; the notes stay.
	o.crash = ""
	r = runDemo(t, o)
	if r.code != 0 || strings.Contains(r.stdout, "[setup]") || !strings.HasPrefix(r.stdout, "[turn 1][save A]") {
		t.Fatalf("start over: %s", r)
	}
	if n := writes(t, dir); n != 1 {
		t.Errorf("%d writes after starting over, want 1", n)
	}
	checkCompleted(t, addr, "fresh")
	// Resuming a finished session only reports it done.
	o.resume = true
	r = runDemo(t, o)
	if want := "[resume] read turn=4 pending=none\n[done] " + finalAnswer + "\n"; r.code != 0 || r.stdout != want {
		t.Errorf("resume of a finished session: %s\nwant:\n%s", r, want)
	}
	checkCompleted(t, addr, "fresh")
	// Starting over replaces the completed session, and completes the new one.
	o.resume = false
	if r = runDemo(t, o); r.code != 0 || !strings.HasPrefix(r.stdout, "[turn 1][save A]") {
		t.Errorf("start over a completed session: %s", r)
	}
	checkCompleted(t, addr, "fresh")
}

// checkCompleted fails the test unless the session is completed with the
// final answer as its output, as savepoint ls shows it.
func checkCompleted(t *testing.T, addr, id string) {
	t.Helper()
	c, err := client.Dial(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Raw().GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if cp := g.GetCheckpoint(); cp.GetStatus() != savepointv1.SessionStatus_SESSION_STATUS_COMPLETED || cp.GetFinalOutput() != finalAnswer {
		t.Errorf("session %q: status %v, final output %q; want completed with %q", id, cp.GetStatus(), cp.GetFinalOutput(), finalAnswer)
	}
}

func TestBadInvocations(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown label", nil, map[string]string{"CRASH_AFTER": "after-lunch:1"}, `unknown label "after-lunch"`},
		{"no turn", nil, map[string]string{"CRASH_AFTER": "after-tool"}, "want LABEL:N or LABEL:N:TOOL"},
		{"turn 0", nil, map[string]string{"CRASH_AFTER": "after-tool:0"}, "the turn must be a number from 1"},
		{"bad pause", nil, map[string]string{"PAUSE_AFTER": "after-tool:x"}, "PAUSE_AFTER"},
		{"unknown script", []string{"--script", "poem"}, nil, `unknown --script "poem"`},
		{"extra argument", []string{"resume"}, nil, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, func(k string) string { return tt.env[k] }, strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

func TestParsePoint(t *testing.T) {
	p, err := parsePoint("after-tool:2:write_report")
	if err != nil || *p != (point{label: "after-tool", turn: 2, tool: "write_report", raw: "after-tool:2:write_report"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if !p.matches("after-tool", 2, "write_report") || p.matches("after-tool", 2, "count_words") || p.matches("after-tool", 3, "write_report") {
		t.Error("a tool-qualified point matches only its tool at its turn")
	}
	p, _ = parsePoint("after-tool:2")
	if !p.matches("after-tool", 2, "count_words") || !p.matches("after-tool", 2, "write_report") || p.matches("after-begin", 2, "write_report") {
		t.Error("an unqualified point matches any tool at its turn")
	}
	if p, err := parsePoint(""); p != nil || err != nil || p.matches("after-tool", 2, "") {
		t.Error("no point matches nothing")
	}
}

func TestScriptedModel(t *testing.T) {
	for _, name := range scriptNames() {
		replies := scripts[name]
		for from := range len(replies) + 1 {
			m, err := NewScripted(name, uint32(from))
			if err != nil {
				t.Fatal(err)
			}
			for i := from; i < len(replies); i++ {
				r, err := m.Create(t.Context(), nil)
				if err != nil || r.Text() != replies[i].Text() {
					t.Fatalf("%s from turn %d: response %d: %q, %v", name, from, i+1, r.Text(), err)
				}
			}
			// Drained: it fails loudly rather than invent an answer.
			if _, err := m.Create(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "response queue drained") {
				t.Errorf("%s from turn %d: drained queue gave %v", name, from, err)
			}
		}
		last := replies[len(replies)-1]
		if last.StopReason != "end_turn" || len(last.ToolUses()) != 0 || last.Text() != finalAnswer {
			t.Errorf("%s does not end with the final answer", name)
		}
	}
	if _, err := NewScripted("poem", 0); err == nil {
		t.Error("unknown script accepted")
	}
	// The scripted report states what count_words finds in the sample.
	out, err := runTool(workdir(t))(t.Context(), client.ToolUse{Name: "count_words", InputJSON: `{"file":"sales-notes.txt"}`}, "")
	if err != nil || !strings.Contains(reportText, out+".") {
		t.Errorf("count_words says %q (%v); the scripted report says %q", out, err, reportText)
	}
}

func TestTools(t *testing.T) {
	dir := workdir(t)
	run := runTool(dir)
	for _, in := range []string{`{"file":"../x"}`, `{"file":"a/b"}`, `{"file":""}`, `{"file":".."}`} {
		if _, err := run(t.Context(), client.ToolUse{Name: "read_notes", InputJSON: in}, ""); err == nil {
			t.Errorf("read_notes %s: want an error", in)
		}
	}
	if _, err := run(t.Context(), client.ToolUse{Name: "rm_rf", InputJSON: `{}`}, ""); err == nil || classOf("rm_rf") != client.SideEffect {
		t.Error("an unknown tool must fail, and count as side-effecting")
	}
	for i := 1; i <= 2; i++ {
		if _, err := run(t.Context(), client.ToolUse{Name: "write_report", InputJSON: `{"file":"r.txt","text":"hi"}`}, "k"); err != nil {
			t.Fatal(err)
		}
		if n := writes(t, dir); n != i {
			t.Errorf("after %d writes, report.writes counts %d", i, n)
		}
	}
}

// A daemon killed mid-run (not the agent): the agent's next call fails
// clearly, nothing runs blind, and once the daemon is back the run resumes
// and finishes.
func TestDaemonKilledMidRun(t *testing.T) {
	tests := []struct {
		pause        string // where the agent is when the daemon dies
		wantStderr   []string
		writesBefore int
		wantDecision string
		wantInDoubt  bool
	}{
		{
			// The next call is BeginEffect: it fails, so write_report does
			// not run, and it is still never begun.
			pause:        "after-save-a:3",
			wantStderr:   []string{`[error] turn 3: savepoint: tool use "toolu_03" (write_report) not run: BeginEffect:`, "is unavailable: start it, then run again with --resume"},
			writesBefore: 0,
			wantDecision: "write_report=RUN(never begun)",
		},
		{
			// The tool ran, its RecordEffect fails: the failure is reported
			// loudly, the result is not turned into an error, and Point B
			// fails; on resume the call is in doubt.
			pause:        "after-tool:3",
			wantStderr:   []string{"[ledger write failed] tool_use_id=toolu_03 name=write_report", "[error] turn 3: saving Point B:", "is unavailable: start it, then run again with --resume"},
			writesBefore: 1,
			wantDecision: "write_report=IN_DOUBT",
			wantInDoubt:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.pause, func(t *testing.T) {
			t.Parallel()
			d, addr := startDaemon(t)
			baseDir := workdir(t)
			if r := runDemo(t, runOpts{addr: addr, dir: baseDir, session: "base", script: "seed"}); r.code != 0 {
				t.Fatalf("uncrashed run: %s", r)
			}
			_, base := history(t, d.Client, "base")

			dir := workdir(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, demoBinary(t), "--addr", addr, "--workdir", dir, "--session", "daemon-killed")
			cmd.Env = append(os.Environ(), "CRASH_AFTER=", "PAUSE_AFTER="+tt.pause)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var stdout strings.Builder
			lines := bufio.NewReader(pipe)
			for {
				line, err := lines.ReadString('\n')
				stdout.WriteString(line)
				if strings.HasPrefix(line, "[pause] ") {
					break
				}
				if err != nil {
					t.Fatalf("no pause line: %v\n%s%s", err, stdout.String(), stderr.String())
				}
			}
			d.Kill()
			io.WriteString(stdin, "\n")
			rest, _ := io.ReadAll(lines)
			stdout.Write(rest)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("with the daemon down: %v, want exit 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if strings.Contains(stdout.String(), "[done]") {
				t.Errorf("claimed done with the daemon down:\n%s", stdout.String())
			}
			if n := writes(t, dir); n != tt.writesBefore {
				t.Errorf("%d writes with the daemon down, want %d", n, tt.writesBefore)
			}
			t.Logf("agent with the daemon down:\n%s%s", stdout.String(), stderr.String())

			d.Restart()
			r := runDemo(t, runOpts{addr: addr, dir: dir, session: "daemon-killed", script: "seed", resume: true})
			if r.code != 0 || strings.Join(decisions(r.stdout), ", ") != tt.wantDecision {
				t.Fatalf("resume after the daemon is back: %s\nwant %s", r, tt.wantDecision)
			}
			if n := writes(t, dir); n != 1 {
				t.Errorf("%d writes after the resume, want 1", n)
			}
			inDoubt := map[string]bool{}
			if tt.wantInDoubt {
				inDoubt["toolu_03"] = true
			}
			_, got := history(t, d.Client, "daemon-killed")
			for _, p := range append(checkPairing(t, got), compareHistory(t, base, got, inDoubt)...) {
				t.Error(p)
			}
		})
	}
}

// The seed's Level 2 bug, as a regression test: a client that writes the
// ledger before running the tool (a placeholder, as runToolUses_prod does)
// and dies in between gets a false "ledger hit" on resume: a write that
// never happened is reported done. With the order the protocol requires, the
// same crash leaves no ledger entry, and the call resumes in doubt (begun)
// or is run (never begun).
func TestLevel2RecordBeforeExecute(t *testing.T) {
	d, addr := startDaemon(t)
	raw := d.Client
	ctx := t.Context()
	dir := workdir(t)

	// runToolUses_prod on the raw gRPC client: the history up to Point A of
	// turn 3, then saveEffect(block.id, {result: null}) before the tool.
	const id = "level2-wrong-order"
	msgs := make([]*savepointv1.Message, 0, 6)
	for i, reply := range scripts["seed"][:3] {
		m, err := reply.Message()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &savepointv1.Message{Role: m.Role, ContentJson: m.ContentJSON})
		if i < 2 {
			res, _ := client.AnthropicToolResults([]client.ToolResult{{ToolUseID: reply.ToolUses()[0].ToolUseID, Content: "earlier result"}})
			msgs = append(msgs, &savepointv1.Message{Role: "user", ContentJson: res[0].ContentJSON})
		}
	}
	prompt := &savepointv1.Message{Role: "user", ContentJson: `[{"type":"text","text":"` + task + `"}]`}
	created, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: id, Task: task, Turn: 2, AppendMessages: append([]*savepointv1.Message{prompt}, msgs[:4]...),
	})
	if err != nil {
		t.Fatal(err)
	}
	call := &savepointv1.ToolUse{ToolUseId: "toolu_03", Name: "write_report", InputJson: reportInput,
		EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true}
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: id, ExpectedRevision: created.GetRevision(), Epoch: created.GetEpoch(), Task: task, Turn: 3,
		AppendMessages: msgs[4:], PendingToolUses: []*savepointv1.ToolUse{call},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: id, ToolUseId: "toolu_03", Output: "null"}); err != nil {
		t.Fatal(err)
	}
	// Killed here, between saveEffect and toolImpls: write_report never ran.
	rec, err := raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if res := rec.GetResolutions(); len(res) != 1 || res[0].GetDecision() != savepointv1.Decision_DECISION_REUSE || res[0].GetEffect().GetOutput() != "null" {
		t.Fatalf("the placeholder: %v, want the (wrong) ledger hit on it", res)
	}
	// Resuming trusts the ledger: "ledger hit", "[done] Report written",
	// and no report exists. This is the incident the seed describes.
	r := runDemo(t, runOpts{addr: addr, dir: dir, session: id, script: "seed", resume: true})
	if r.code != 0 || strings.Join(decisions(r.stdout), ", ") != "write_report=REUSE" || !strings.Contains(r.stdout, "[done] "+finalAnswer) {
		t.Fatalf("resume after the wrong order: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, reportFile)); !errors.Is(err, os.ErrNotExist) || writes(t, dir) != 0 {
		t.Fatalf("report.txt exists (%v) or was written %d times; the bug is that it never was", err, writes(t, dir))
	}
	t.Logf("records before executing, killed in between, resumed:\n%s", r.stdout)

	// The order the protocol requires, killed at the same point (dispatched,
	// not run): no ledger entry, so no false hit. The resume says in doubt.
	dir = workdir(t)
	o := runOpts{addr: addr, dir: dir, session: "level2-right-order", script: "seed", crash: "after-begin:3"}
	if r := runDemo(t, o); r.code != 137 {
		t.Fatal(r)
	}
	rec, err = raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: o.session})
	if err != nil {
		t.Fatal(err)
	}
	if res := rec.GetResolutions(); len(res) != 1 || res[0].GetEffect() != nil || res[0].GetDecision() != savepointv1.Decision_DECISION_IN_DOUBT || !res[0].GetBegun() {
		t.Fatalf("right order, killed after begin: %v, want no ledger entry and in doubt", res)
	}
	o.resume, o.crash = true, ""
	if r := runDemo(t, o); r.code != 0 || strings.Join(decisions(r.stdout), ", ") != "write_report=IN_DOUBT" {
		t.Fatalf("right order resumed: %s", r)
	}
}

// The Session cannot express the wrong order: it has no call that takes an
// output to record. RunTool (and Reconcile, for a tool that must run)
// records what fn returned, after it returned; PointB re-records only a
// result RunTool produced. While the tool runs, the ledger has nothing for
// it.
func TestSessionRecordsOnlyAfterRunning(t *testing.T) {
	_, addr := startDaemon(t)
	ctx := t.Context()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Start(ctx, "session-order", task, &client.StartOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	reply := scripts["seed"][2]
	msg, _ := reply.Message()
	call := reply.ToolUses()[0]
	if err := s.PointA(ctx, msg, []client.ToolUse{call}); err != nil {
		t.Fatal(err)
	}
	// A placeholder handed to PointB to record is refused.
	placeholder := client.ToolResult{ToolUseID: call.ToolUseID, Content: "null", LedgerErr: errors.New("record me")}
	if err := s.PointB(ctx, []client.ToolResult{placeholder}); !errors.Is(err, client.ErrNotRun) {
		t.Fatalf("PointB of a placeholder: %v, want ErrNotRun", err)
	}
	dir := workdir(t)
	r := s.RunTool(ctx, call, func(ctx context.Context, key string) (string, error) {
		rec, err := c.Raw().Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "session-order"})
		if err != nil {
			return "", err
		}
		if res := rec.GetResolutions()[0]; res.GetEffect() != nil || res.GetDecision() != client.DecisionInDoubt {
			t.Errorf("while the tool runs: %v, want no ledger entry (in doubt: begun, not recorded)", res)
		}
		return runTool(dir)(ctx, call, key)
	})
	if r.Err != nil || r.LedgerErr != nil {
		t.Fatal(r)
	}
	rec, err := c.Raw().Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "session-order"})
	if err != nil {
		t.Fatal(err)
	}
	if res := rec.GetResolutions()[0]; res.GetDecision() != client.DecisionReuse || res.GetEffect().GetOutput() != r.Content || writes(t, dir) != 1 {
		t.Errorf("after the tool ran: %v, want its real output %q recorded", res, r.Content)
	}
}
