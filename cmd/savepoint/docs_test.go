package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

const (
	operationsDoc = "../../docs/operations.md"
	docSection    = "## Inspecting sessions"
	// docSocket is the address the documented commands name; the test runs
	// them against its own daemon's socket instead.
	docSocket = "/run/savepoint/savepoint.sock"
)

// docTools are the programs the documented commands run, besides savepoint
// itself: the environment variable `make test-cli` sets to each one's path,
// and its name under ./bin otherwise.
var docTools = []struct{ env, name string }{
	{"SAVEPOINT_GRPCURL", "grpcurl"},
	{"SAVEPOINT_GRPC_HEALTH_PROBE", "grpc_health_probe"},
}

// docCommand is one shell command of the doc, with the output the doc shows
// for it (empty when it shows none) and the exit status it says it has.
type docCommand struct {
	line   int    // in the doc, for messages
	text   string // the command, heredoc and continuation lines included
	output string // the fenced block that follows, if it is not a command
	shown  bool   // whether such a block follows
	// outLines are the doc's line indexes [from, to) of that block's body.
	outLines [2]int
	exit     int // from a trailing "# exit N" comment; 0 otherwise
}

var exitComment = regexp.MustCompile(`#\s*exit (\d+)\s*$`)

// docCommandRE matches the first line of a documented command: savepoint,
// grpcurl or grpc_health_probe, from $PATH or, as the README runs them, from
// ./bin.
var docCommandRE = regexp.MustCompile(`^(bin/)?(savepoint|grpcurl|grpc_health_probe) `)

// docCommands extracts the commands of the section of the Markdown file path
// that starts with heading: every line of its ```sh blocks that runs
// savepoint, grpcurl or grpc_health_probe (docCommandRE), each with the block after it as
// its output when that block is not itself a command block.
func docCommands(t *testing.T, path, heading string) []docCommand {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if l == heading {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no %q section", path, heading)
	}
	type block struct {
		line       int // of the opening fence, 1-based
		lang, body string
		to         int // index of the closing fence
	}
	var blocks []block
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		b := block{line: i + 1, lang: strings.TrimPrefix(l, "```")}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		b.body, b.to = strings.Join(body, "\n"), i
		blocks = append(blocks, b)
	}
	var cmds []docCommand
	for bi, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		var inBlock []docCommand
		sc := bufio.NewScanner(strings.NewReader(b.body))
		n := b.line
		for sc.Scan() {
			n++
			l := sc.Text()
			if !docCommandRE.MatchString(l) {
				continue
			}
			c := docCommand{line: n, text: l}
			// Continuation lines, then a heredoc's body up to its terminator.
			for strings.HasSuffix(strings.TrimSpace(c.text), "\\") && sc.Scan() {
				n++
				c.text += "\n" + sc.Text()
			}
			if m := regexp.MustCompile(`<<-?'?(\w+)'?`).FindStringSubmatch(c.text); m != nil {
				for sc.Scan() {
					n++
					c.text += "\n" + sc.Text()
					if sc.Text() == m[1] {
						break
					}
				}
			}
			if m := exitComment.FindStringSubmatch(c.text); m != nil {
				c.exit, _ = strconv.Atoi(m[1])
			}
			inBlock = append(inBlock, c)
		}
		if bi+1 < len(blocks) && blocks[bi+1].lang != "sh" {
			if len(inBlock) != 1 {
				t.Fatalf("%s:%d: a block followed by output must hold one command, not %d", path, b.line, len(inBlock))
			}
			o := blocks[bi+1]
			inBlock[0].output, inBlock[0].shown = o.body, true
			inBlock[0].outLines = [2]int{o.line, o.to}
		}
		cmds = append(cmds, inBlock...)
	}
	return cmds
}

// findTool returns the path of a tool the documented commands need: from
// its environment variable, which `make test-cli` sets (then it must exist),
// else under the repository's ./bin; "" when neither has it.
func findTool(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$%s: %v (make test-cli installs it)", env, err)
		}
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

var (
	versionLineRE = regexp.MustCompile(`(?m)^(version +)\S+$`)
	versionJSONRE = regexp.MustCompile(`"version": "[^"]*"`)
)

// normalizeDoc makes an output comparable with the doc's: the test's socket
// is the documented one, and times, idempotency keys and versions are
// placeholders on both sides.
func normalizeDoc(s, socket string) string {
	s = strings.ReplaceAll(s, socket, docSocket)
	s = timeRE.ReplaceAllString(s, "TIME")
	s = keyRE.ReplaceAllString(s, "KEY")
	s = versionLineRE.ReplaceAllString(s, "${1}VERSION")
	s = versionJSONRE.ReplaceAllString(s, `"version": "VERSION"`)
	s = storeLocationRE.ReplaceAllString(s, `"storeLocation": "DATA_DIR"`)
	s = uptimeRE.ReplaceAllString(s, `"uptime": "UPTIME"`)
	s = pidRE.ReplaceAllString(s, `"pid": PID`)
	s = storeBytesRE.ReplaceAllString(s, `"storeBytes": "STORE_BYTES"`)
	return strings.TrimRight(s, "\n")
}

// What GetServerInfo says of the run rather than of the commands: where
// the test's store is, how long it has served, its process id, and the
// store's size, which grows by a preallocated log segment when the
// background preallocation wins the race with the command.
var (
	storeLocationRE = regexp.MustCompile(`"storeLocation": "[^"]*"`)
	uptimeRE        = regexp.MustCompile(`"uptime": "[0-9.]+s"`)
	pidRE           = regexp.MustCompile(`"pid": [0-9]+`)
	storeBytesRE    = regexp.MustCompile(`"storeBytes": "[0-9]+"`)
)

// seedDoc makes the state the doc's walk-through starts from: the agent of
// report-1 died in its first turn after recording write_report and
// beginning send_email; notes-2 has nothing pending.
func seedDoc(t *testing.T, raw savepointv1.SavepointServiceClient) {
	t.Helper()
	ctx := t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	task := "Write the weekly report"
	labels := map[string]string{"team": "infra"}
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "report-1", Task: task, Labels: labels,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `[{"type":"text","text":"Write the weekly report to report.md and mail it to the team."}]`}},
	}))
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "report-1", ExpectedRevision: 1, Task: task, Labels: labels, Turn: 1,
		AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"tool_use","id":"toolu_01","name":"write_report","input":{"path":"report.md"}},` +
			`{"type":"tool_use","id":"toolu_02","name":"send_email","input":{"to":"team@example.com"}},` +
			`{"type":"tool_use","id":"toolu_03","name":"read_calendar","input":{}}]`}},
		PendingToolUses: []*savepointv1.ToolUse{
			{ToolUseId: "toolu_01", Name: "write_report", InputJson: `{"path":"report.md"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true},
			{ToolUseId: "toolu_02", Name: "send_email", InputJson: `{"to":"team@example.com"}`, EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true},
			{ToolUseId: "toolu_03", Name: "read_calendar", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY},
		},
	}))
	must(raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "report-1", ToolUseId: "toolu_01"}))
	must(raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "report-1", ToolUseId: "toolu_01", Output: "wrote report.md (41 lines)"}))
	must(raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "report-1", ToolUseId: "toolu_02"}))
	must(raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: "notes-2", Task: "Summarise the notes",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"Summarise notes.txt"`}},
	}))
}

// TestOperationsDoc runs every savepoint, grpcurl and grpc_health_probe
// command of docs/operations.md's "Inspecting sessions", in order, against a
// live daemon holding the state the section describes, and checks each
// command's exit status and the output the doc shows for it.
func TestOperationsDoc(t *testing.T) {
	bin := docToolDir(t)
	cmds := docCommands(t, operationsDoc, docSection)
	counts := map[string]int{}
	for _, c := range cmds {
		counts[strings.Fields(c.text)[0]]++
	}
	for _, tool := range []string{"savepoint", "grpcurl", "grpc_health_probe"} {
		if counts[tool] == 0 {
			t.Errorf("%s documents no %s command", operationsDoc, tool)
		}
	}

	d := daemontest.StartInProcess(t, daemon.Config{})
	seedDoc(t, d.Client)
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "SAVEPOINT_ADDR=unix:" + d.Socket}
	checkDocCommands(t, operationsDoc, cmds, t.TempDir(), d.Socket, env, nil)
	t.Logf("ran %d documented commands: %v", len(cmds), fmt.Sprint(counts))
}

// docToolDir returns a directory holding the programs the documented
// commands run: grpcurl and grpc_health_probe (docTools), and savepoint
// built from this tree. The test skips when a tool is not to be had.
func docToolDir(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, tool := range docTools {
		p := findTool(t, tool.env, tool.name)
		if p == "" {
			t.Skipf("%s is not in ./bin: make test-cli installs it and runs this test", tool.name)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool.name)); err != nil {
			t.Fatal(err)
		}
	}
	linkSavepoint(t, bin)
	return bin
}

// linkSavepoint puts savepoint, built from this tree, into dir.
func linkSavepoint(t *testing.T, dir string) {
	t.Helper()
	cli := daemontest.Build(t, "github.com/savepoint-dev/savepoint/cmd/savepoint")
	if err := os.Symlink(cli, filepath.Join(dir, "savepoint")); err != nil {
		t.Fatal(err)
	}
}

// checkDocCommands runs the commands of the doc path in order, each with
// bash in dir with env added, the doc's socket replaced by the test's, and
// checks each one's exit status and the output the doc shows for it; with
// -update it rewrites the doc's outputs instead, keeping each line whose
// only difference is a time, key, pid or the like (updatedOutput), so that
// an update of an unchanged doc changes nothing. before, when not nil, runs
// before each command.
func checkDocCommands(t testing.TB, path string, cmds []docCommand, dir, socket string, env []string, before func(docCommand)) {
	t.Helper()
	outputs := map[int]string{} // with -update: doc line of the output block -> the real output
	for _, c := range cmds {
		if before != nil {
			before(c)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		sh := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", strings.ReplaceAll(c.text, docSocket, socket))
		sh.Dir = dir
		sh.Env = append(os.Environ(), env...)
		out, err := sh.CombinedOutput()
		cancel()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s:%d: %v", path, c.line, err)
		}
		if code != c.exit {
			t.Errorf("%s:%d: %s\nexit %d, the doc says %d; output:\n%s", path, c.line, c.text, code, c.exit, out)
			continue
		}
		if !c.shown {
			continue
		}
		if *update {
			outputs[c.outLines[0]] = updatedOutput(c.output, strings.TrimRight(strings.ReplaceAll(string(out), socket, docSocket), "\n"), socket)
			continue
		}
		if got, want := normalizeDoc(string(out), socket), normalizeDoc(c.output, socket); got != want {
			t.Errorf("%s:%d: %s\nprints (normalised):\n%s\nthe doc shows (normalised):\n%s (go test -update rewrites it)", path, c.line, c.text, got, want)
		}
	}
	if *update {
		rewriteOutputs(t, path, cmds, outputs)
	}
}

// updatedOutput is the output block -update writes for a command that
// printed got where the doc shows old: got, except that each of its lines
// that matches a line of old once both are normalised (normalizeDoc: times,
// idempotency keys, pids and the like as placeholders) keeps old's text, the
// lines matched in order (a longest common subsequence). An unchanged output
// stays old byte for byte; a changed one differs from old only in the lines
// that really changed.
func updatedOutput(old, got, socket string) string {
	if normalizeDoc(old, socket) == normalizeDoc(got, socket) {
		return old
	}
	o, g := strings.Split(old, "\n"), strings.Split(got, "\n")
	norm := func(ls []string) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = normalizeDoc(l, socket)
		}
		return out
	}
	no, ng := norm(o), norm(g)
	// lcs[i][j]: the longest common subsequence of no[i:] and ng[j:].
	lcs := make([][]int, len(no)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(ng)+1)
	}
	for i := len(no) - 1; i >= 0; i-- {
		for j := len(ng) - 1; j >= 0; j-- {
			if no[i] == ng[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	for i, j := 0, 0; i < len(no) && j < len(ng); {
		switch {
		case no[i] == ng[j]:
			g[j] = o[i]
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			j++
		}
	}
	return strings.Join(g, "\n")
}

// rewriteOutputs replaces the doc's output blocks with the outputs the
// commands printed (go test -update), from the last block up.
func rewriteOutputs(t testing.TB, path string, cmds []docCommand, outputs map[int]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i := len(cmds) - 1; i >= 0; i-- {
		c := cmds[i]
		out, ok := outputs[c.outLines[0]]
		if !c.shown || !ok {
			continue
		}
		var repl []string
		if out != "" {
			repl = strings.Split(out, "\n")
		}
		lines = append(lines[:c.outLines[0]], append(repl, lines[c.outLines[1]:]...)...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The doc's table of exit codes has a row for each code the help lists.
func TestOperationsDocExitCodes(t *testing.T) {
	data, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), docSection)
	if i < 0 {
		t.Fatalf("%s has no %q section", operationsDoc, docSection)
	}
	section := string(data)[i:]
	doc := regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(section, -1)
	help := regexp.MustCompile(`(?m)^  (\d+)  `).FindAllStringSubmatch(exitCodesHelp, -1)
	var got, want []string
	for _, m := range doc {
		got = append(got, m[1])
	}
	for _, m := range help {
		want = append(want, m[1])
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || len(want) != exitFenced+1 {
		t.Errorf("%s lists exit codes %v; the help lists %v", operationsDoc, got, want)
	}
}

// TestOperationsBackupDoc runs the savepoint commands of docs/operations.md's
// "Backup and restore", in order, against a live daemon, and checks that each
// one succeeds and writes its file.
func TestOperationsBackupDoc(t *testing.T) {
	bin := t.TempDir()
	linkSavepoint(t, bin)
	cmds := docCommands(t, operationsDoc, "## Backup and restore")
	if len(cmds) < 2 {
		t.Fatalf("%s's backup section has %d savepoint commands", operationsDoc, len(cmds))
	}
	d := daemontest.StartInProcess(t, daemon.Config{})
	seedDoc(t, d.Client)
	work := t.TempDir()
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "SAVEPOINT_ADDR=unix:" + d.Socket}
	checkDocCommands(t, operationsDoc, cmds, work, d.Socket, env, nil)
	for _, c := range cmds {
		if f := strings.Fields(c.text); len(f) > 2 && f[len(f)-2] == "-o" {
			if fi, err := os.Stat(filepath.Join(work, f[len(f)-1])); err != nil || fi.Size() == 0 {
				t.Errorf("%s:%d: %s wrote no file: %v", operationsDoc, c.line, c.text, err)
			}
		}
	}
}
