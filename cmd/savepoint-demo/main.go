// Command savepoint-demo is the seed's agent on Savepoint: it turns
// sales-notes.txt into a short report with three tools, read_notes and
// count_words (read-only) and write_report (side-effecting), checkpointing
// every turn at Point A and Point B in savepointd and recording every tool's
// outcome in its ledger. Kill it anywhere, run it again with --resume, and
// it finishes without writing the report twice and without pretending to
// know what it cannot.
//
// The model is scripted: a fixed queue of responses that fails loudly when
// drained (-script seed: one tool per turn over three turns; -script
// parallel: one turn names count_words and write_report together). It sits
// behind the Model interface, so a real provider client can replace it.
//
// Usage:
//
//	savepoint-demo [--addr unix:PATH] [--session ID] [--workdir DIR] [--script seed|parallel] [--resume]
//
// The work directory holds sales-notes.txt (a sample is written at a fresh
// start if it is missing), report.txt, and report.writes, which gets one
// line per real write of report.txt so that a double write shows. A fresh
// start (no --resume) replaces the session and empties report.writes.
//
// Simulated kills: CRASH_AFTER=LABEL:N stops the process at a point of turn
// N, printing "[kill] simulated kill at LABEL:N" and exiting with status 137
// at once (os.Exit: no deferred cleanup, as with a real kill). The labels,
// in the order they happen within a turn:
//
//	after-save-a        Point A saved: the tool uses are pending, none started
//	after-begin         BeginEffect marked a side-effecting tool as dispatched; it has not run
//	after-tool          the tool returned; its outcome is not in the ledger
//	after-effect-write  the outcome is in the ledger; Point B not saved
//	after-save-b        Point B saved: the results are in the history, nothing pending
//
// LABEL:N:TOOL picks one tool of a turn that names several. During a
// resume, the pending turn's points fire with that turn's number.
// PAUSE_AFTER=LABEL:N instead stops there until a line is read from stdin,
// which leaves time to kill or restart savepointd by hand.
//
// Exit status: 0 when the task is complete, 1 on an error (the message says
// what to do; usually start savepointd and run again with --resume), 2 for
// bad flags or environment, 137 after a simulated kill.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
)

const (
	task     = "Turn sales-notes.txt into a short report and write it to report.txt."
	maxTurns = 20
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// demo is one run of the agent.
type demo struct {
	out, errw io.Writer
	in        *bufio.Reader
	dir       string
	addr      string
	resume    bool
	crash     *point
	pause     *point
	paused    bool
	sess      *client.Session
	exit      func(int)
}

func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("savepoint-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "savepointd address, unix:PATH or HOST:PORT (default: $SAVEPOINT_ADDR, else\n$XDG_RUNTIME_DIR/savepoint/savepoint.sock, else /run/savepoint/savepoint.sock)")
	session := fs.String("session", "sales-report", "session id")
	resume := fs.Bool("resume", false, "resume the session from its latest checkpoint instead of starting over")
	workdir := fs.String("workdir", ".", "directory holding sales-notes.txt, report.txt and report.writes")
	script := fs.String("script", "seed", "scripted model: "+strings.Join(scriptNames(), " or "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: savepoint-demo [flags]\n\n"+
			"Turns sales-notes.txt into report.txt with a scripted model, checkpointed by savepointd.\n"+
			"CRASH_AFTER=LABEL:N[:TOOL] simulates a kill (exit 137); PAUSE_AFTER=LABEL:N[:TOOL] waits for Enter.\n"+
			"Labels: %s.\n\n", strings.Join(labels, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "savepoint-demo: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if _, ok := scripts[*script]; !ok {
		fmt.Fprintf(stderr, "savepoint-demo: unknown --script %q (have %s)\n", *script, strings.Join(scriptNames(), ", "))
		return 2
	}
	d := &demo{out: stdout, errw: stderr, in: bufio.NewReader(stdin), dir: *workdir, addr: *addr, resume: *resume, exit: os.Exit}
	var err error
	if d.crash, err = parsePoint(getenv("CRASH_AFTER")); err != nil {
		fmt.Fprintf(stderr, "savepoint-demo: CRASH_AFTER=%v\n", err)
		return 2
	}
	if d.pause, err = parsePoint(getenv("PAUSE_AFTER")); err != nil {
		fmt.Fprintf(stderr, "savepoint-demo: PAUSE_AFTER=%v\n", err)
		return 2
	}

	ctx := context.Background()
	c, err := client.Dial(ctx, *addr,
		client.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		client.WithToolHook(d.hook),
		client.WithLedgerErrorHandler(d.ledgerFailed),
	)
	if err != nil {
		fmt.Fprintf(stderr, "[error] %v\n", err)
		return 2
	}
	defer c.Close()

	text, err := d.runAgent(ctx, c, *session, *script, *resume)
	if err == nil {
		err = d.complete(ctx, *session, text)
	}
	if err != nil {
		d.fail(err, *session)
		return 1
	}
	fmt.Fprintf(stdout, "[done] %s\n", text)
	d.check()
	return 0
}

// complete marks the finished session completed with the final answer, as
// a real agent does when its task is done, so that savepoint ls shows it
// completed. Completing an already completed session (a resume after the
// task was done) with the same answer succeeds.
func (d *demo) complete(ctx context.Context, id, text string) error {
	if err := d.sess.Complete(ctx, client.StatusCompleted, text); err != nil {
		return fmt.Errorf("completing session %q: %w", id, err)
	}
	return nil
}

// runAgent is the seed's runAgent on a Session: start (or resume and
// reconcile), then ask the model, save Point A, run the tools, save Point B,
// until the model answers without naming a tool.
func (d *demo) runAgent(ctx context.Context, c *client.Client, id, script string, resume bool) (string, error) {
	run := runTool(d.dir)
	var s *client.Session
	var err error
	if resume {
		s, err = c.Resume(ctx, id)
		if errors.Is(err, client.ErrSessionNotFound) {
			return "", fmt.Errorf("session %q does not exist, run without --resume to start it: %w", id, err)
		}
		if err != nil {
			return "", fmt.Errorf("resuming session %q: %w", id, err)
		}
		d.sess = s
		pending := s.Pending()
		fmt.Fprintf(d.out, "[resume] read turn=%d pending=%s\n", s.Turn(), names(pending))
		if len(pending) > 0 {
			// The hook prints one [resume][reconcile] line per decision,
			// before acting on it.
			results, err := s.Reconcile(ctx, run)
			if err != nil {
				return "", fmt.Errorf("turn %d: reconciling the pending tool uses: %w", s.Turn(), err)
			}
			if err := s.PointB(ctx, results); err != nil {
				return "", fmt.Errorf("turn %d: saving Point B after resume: %w", s.Turn(), err)
			}
			what := "tool result"
			if len(results) > 1 {
				what = "tool results"
			}
			fmt.Fprintf(d.out, "[turn %d][save B] filled in this turn's %s after resume\n", s.Turn(), what)
			d.at("after-save-b", s.Turn(), "")
		}
		if text, done := finished(s.Messages()); done {
			return text, nil // it died after saving the final answer
		}
	} else {
		if err := d.prepare(); err != nil {
			return "", err
		}
		prompt, err := json.Marshal([]Block{textBlock(task)})
		if err != nil {
			return "", err
		}
		s, err = c.Start(ctx, id, task, &client.StartOptions{
			Replace:  true, // start over: the old checkpoints and ledger go
			Messages: []client.Message{{Role: "user", ContentJSON: string(prompt)}},
		})
		if err != nil {
			return "", fmt.Errorf("starting session %q: %w", id, err)
		}
		d.sess = s
	}

	// The scripted model continues from the checkpoint's turn.
	model, err := NewScripted(script, s.Turn())
	if err != nil {
		return "", err
	}
	for s.Turn() < maxTurns {
		reply, err := model.Create(ctx, s.Messages())
		if err != nil {
			return "", err
		}
		calls := reply.ToolUses()
		if (reply.StopReason == "tool_use") != (len(calls) > 0) {
			return "", fmt.Errorf("model: stop_reason %q with %d tool uses", reply.StopReason, len(calls))
		}
		msg, err := reply.Message()
		if err != nil {
			return "", err
		}
		s.AddTokens(reply.Tokens)
		// Point A: the assistant message and its tool uses, pending, before
		// any tool runs.
		if err := s.PointA(ctx, msg, calls); err != nil {
			return "", fmt.Errorf("turn %d: saving Point A: %w", s.Turn()+1, err)
		}
		turn := s.Turn()
		if len(calls) == 0 {
			d.at("after-save-a", turn, "")
			return reply.Text(), nil
		}
		fmt.Fprintf(d.out, "[turn %d][save A] pending=%s\n", turn, names(calls))
		d.at("after-save-a", turn, "")
		// Each tool: BeginEffect unless read-only, run, RecordEffect.
		results, err := s.RunTools(ctx, calls, run)
		if err != nil {
			return "", fmt.Errorf("turn %d: %w", turn, err)
		}
		// Point B: the results in the history, nothing pending.
		if err := s.PointB(ctx, results); err != nil {
			return "", fmt.Errorf("turn %d: saving Point B: %w", turn, err)
		}
		fmt.Fprintf(d.out, "[turn %d][save B]\n", turn)
		d.at("after-save-b", turn, "")
	}
	return "", fmt.Errorf("reached the limit of %d turns, stopping", maxTurns)
}

// hook sees every stage of every tool use the session runs or reconciles:
// it prints the reconcile decisions and fires the crash points that happen
// inside RunTool and Reconcile.
func (d *demo) hook(ev client.ToolEvent) {
	turn := d.sess.Turn()
	switch ev.Stage {
	case client.StageDecided:
		fmt.Fprintf(d.out, "[resume][reconcile] tool_use_id=%s name=%s %s\n", ev.Call.ToolUseID, ev.Call.Name, decisionText(ev))
	case client.StageBegun:
		d.at("after-begin", turn, ev.Call.Name)
	case client.StageRan:
		d.at("after-tool", turn, ev.Call.Name)
	case client.StageRecorded:
		d.at("after-effect-write", turn, ev.Call.Name)
	}
}

func decisionText(ev client.ToolEvent) string {
	switch ev.Decision {
	case client.DecisionReuse:
		return "ledger hit, reusing result, not re-running"
	case client.DecisionRun:
		switch ev.Call.EffectClass {
		case client.ReadOnly:
			return "ledger miss, read-only tool, re-running"
		case client.Idempotent:
			return "ledger miss, idempotent tool, re-running with its idempotency key"
		default:
			return "ledger miss, side-effecting tool was never started (not begun), running it safely"
		}
	case client.DecisionInDoubt:
		if ev.Begun {
			return "ledger miss with side effects, begun but not recorded: in doubt, not re-running, appending is_error"
		}
		return "ledger miss with side effects, not begin-tracked: in doubt, not re-running, appending is_error"
	}
	return fmt.Sprintf("unknown decision %v", ev.Decision)
}

// at is a crash (and pause) point.
func (d *demo) at(label string, turn uint32, tool string) {
	if !d.paused && d.pause.matches(label, turn, tool) {
		d.paused = true
		fmt.Fprintf(d.out, "[pause] paused at %s; press Enter to continue\n", d.pause.raw)
		d.in.ReadString('\n')
	}
	if d.crash.matches(label, turn, tool) {
		fmt.Fprintf(d.out, "[kill] simulated kill at %s\n", d.crash.raw)
		d.exit(137)
	}
}

func (d *demo) ledgerFailed(call client.ToolUse, _ client.ToolResult, err error) {
	fmt.Fprintf(d.errw, "[ledger write failed] tool_use_id=%s name=%s: the tool ran and its side effect may have happened, "+
		"but its outcome is not recorded; if this run stops before Point B, resume reports it in doubt: %v\n", call.ToolUseID, call.Name, err)
}

// fail explains an error and what to do next.
func (d *demo) fail(err error, id string) {
	fmt.Fprintf(d.errw, "[error] %v\n", err)
	addr := d.addr
	if addr == "" {
		addr = client.DefaultAddr()
	}
	again := "run again with --resume to continue from the last checkpoint"
	if d.sess == nil && !d.resume {
		again = "run again" // nothing was saved
	}
	switch {
	case errors.Is(err, client.ErrUnavailable):
		fmt.Fprintf(d.errw, "[error] savepointd at %s is unavailable: start it, then %s\n", addr, again)
	case errors.Is(err, client.ErrSessionFenced):
		fmt.Fprintf(d.errw, "[error] another process resumed session %q and owns it now; this one stops\n", id)
	case errors.Is(err, client.ErrSessionNotFound):
	default:
		fmt.Fprintf(d.errw, "[error] %s\n", again)
	}
}

// prepare readies the work directory for a fresh start.
func (d *demo) prepare() error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	notes := filepath.Join(d.dir, notesFile)
	if _, err := os.Stat(notes); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(notes, []byte(sampleNotes), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "[setup] no %s in %s: wrote a sample\n", notesFile, d.dir)
	}
	if err := os.Remove(filepath.Join(d.dir, writesFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// check points at tool uses that ended as is_error (in doubt after a crash,
// or failed), which a person may need to look at.
func (d *demo) check() {
	names := map[string]string{}
	for _, m := range d.sess.Messages() {
		for _, b := range contentBlocks(m) {
			switch {
			case b.Type == "tool_use":
				names[b.ID] = b.Name
			case b.Type == "tool_result" && b.IsError:
				fmt.Fprintf(d.out, "[check] tool_use_id=%s name=%s ended as is_error (in doubt or failed): check its effect by hand\n", b.ToolUseID, names[b.ToolUseID])
			}
		}
	}
}

// block is any content block, for reading the history back.
type block struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
}

// contentBlocks decodes a message's Anthropic content: an array of blocks,
// or a string (one text block).
func contentBlocks(m client.Message) []block {
	var blocks []block
	if json.Unmarshal([]byte(m.ContentJSON), &blocks) == nil {
		return blocks
	}
	var s string
	if json.Unmarshal([]byte(m.ContentJSON), &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	return nil
}

// finished says whether the history ends with the model's final answer (an
// assistant message naming no tool), and returns its text.
func finished(msgs []client.Message) (string, bool) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		return "", false
	}
	var texts []string
	for _, b := range contentBlocks(msgs[len(msgs)-1]) {
		switch b.Type {
		case "tool_use":
			return "", false
		case "text":
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), true
}

func names(calls []client.ToolUse) string {
	if len(calls) == 0 {
		return "none"
	}
	var n []string
	for _, c := range calls {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",")
}
