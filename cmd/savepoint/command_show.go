package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"

	"github.com/savepoint-dev/savepoint/internal/cli"
)

func init() {
	register(&command{
		name:     "show",
		example:  `savepoint show report-1 --revision 2`,
		synopsis: "SESSION [--revision N] | --thread THREAD",
		summary:  "print a session as a transcript, with its pending tool uses and what Reconcile decides; or a graph thread",
		help: `
Prints one revision of a session for a person to read: its task, turn,
epoch and labels; its whole history, message by message (text, tool_use and
tool_result blocks are shown as text, other content as JSON), with a turn
marker before each assistant message; its pending tool uses, each with the
decision Reconcile makes for it now (REUSE, RUN or IN_DOUBT, and why), the
idempotency key of a begun tool use and the tool result an in-doubt one
gets; and the effects recorded for them, as Reconcile reports them. It
reads only: it takes no ownership and runs nothing.

--revision reads an older kept revision; Reconcile decides only the latest
revision's pending tool uses, so an older one's are listed without decisions.

--thread THREAD prints a LangGraph thread instead: its checkpoints, newest
first, in every namespace (id, parent, pending writes, metadata), and its
ledger, each tool use with its input, idempotency key, latest attempt and
outcome, and what a node running it again is answered and why (the rules
savepoint help effects lists).`,
		setup: setupShow,
	})
}

func setupShow(fs *flag.FlagSet) runFunc {
	revision := fs.Uint64("revision", 0, "the kept revision `N` to show (default: the latest)")
	thread := fs.String("thread", "", "show the graph thread `THREAD` instead of a session")
	return func(ctx context.Context, e *env, args []string) error {
		if *thread != "" {
			v, err := threadArg(ctx, e, args, *revision, *thread)
			if err != nil {
				return err
			}
			return printThread(e.stdout, v)
		}
		id, err := sessionArg(args)
		if err != nil {
			return err
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		v, err := loadView(ctx, c, id, *revision)
		if err != nil {
			return err
		}
		if err := v.countLedger(ctx, c); err != nil {
			return err
		}
		return printTranscript(e.stdout, v)
	}
}

// threadArg loads the graph thread of a --thread command, which takes no
// SESSION and no --revision.
func threadArg(ctx context.Context, e *env, args []string, revision uint64, thread string) (*threadView, error) {
	if len(args) > 0 {
		return nil, usagef("give SESSION or --thread, not both")
	}
	if revision != 0 {
		return nil, usagef("--revision is a session's; a thread's checkpoints are all shown")
	}
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	return loadThread(ctx, c, thread)
}

// sessionArg returns the one SESSION argument of a command.
func sessionArg(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usagef("missing SESSION")
	case 1:
		return args[0], nil
	}
	return "", usagef("want one SESSION, got %s", cli.Count(len(args), "argument"))
}

// printTranscript writes what "savepoint show" prints of v: the
// checkpoint's header, its history, and its pending tool uses with what
// Reconcile decides of them and their ledger entries. It returns the first
// write error.
func printTranscript(w io.Writer, v *sessionView) error {
	p := &printer{w: w}
	p.header(v)
	p.history(v.checkpoint.GetMessages())
	p.pending(v)
	return p.err
}

// header prints the session's and the revision's fields.
func (p *printer) header(v *sessionView) {
	cp := v.checkpoint
	latest := "latest"
	if cp.GetRevision() != v.latest {
		latest = fmt.Sprintf("the latest is %d", v.latest)
	}
	p.line("session   %s", cp.GetSessionId())
	p.line("revision  %d (%s), epoch %d", cp.GetRevision(), latest, cp.GetEpoch())
	if st := cp.GetStatus(); st == savepointv1.SessionStatus_SESSION_STATUS_COMPLETED || st == savepointv1.SessionStatus_SESSION_STATUS_FAILED {
		p.line("status    %s at %s: %s", statusName(st), formatTime(cp.GetCompleteTime()), quoteLine(cp.GetFinalOutput()))
	} else {
		p.line("status    %s", statusName(st))
	}
	p.line("task      %s", cp.GetTask())
	p.line("turn      %d, %d tokens used", cp.GetTurn(), cp.GetTokensUsed())
	if v.counts != nil {
		p.line("calls     %s", v.counts)
	}
	p.line("created   %s", formatTime(cp.GetCreateTime()))
	p.line("saved     %s", formatTime(cp.GetSaveTime()))
	if len(cp.GetLabels()) > 0 {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(cp.GetLabels())) {
			ls = append(ls, k+"="+cp.GetLabels()[k])
		}
		p.line("labels    %s", strings.Join(ls, " "))
	}
	if cp.GetStateJson() != "" {
		p.line("state     %s", compact(cp.GetStateJson()))
	}
}

// history prints the messages, a turn heading before each assistant
// message.
func (p *printer) history(msgs []*savepointv1.Message) {
	p.line("")
	p.line("History (%s)", cli.Count(len(msgs), "message"))
	turn := 0
	for i, m := range msgs {
		if m.GetRole() == "assistant" {
			turn++
			p.line("")
			p.line("-- turn %d", turn)
		}
		p.line("[%d] %s", i, m.GetRole())
		for _, l := range contentLines(m.GetContentJson()) {
			p.line("    %s", l)
		}
	}
}

// pending prints the pending tool uses: as they are when v has no
// Reconcile answer (an older revision), else with Reconcile's decision of
// each and then their ledger entries.
func (p *printer) pending(v *sessionView) {
	pending := v.checkpoint.GetPendingToolUses()
	p.line("")
	if v.reconcile == nil {
		p.line("Pending tool uses (%d); Reconcile decides only the latest revision's", len(pending))
		for _, u := range pending {
			p.toolUse(u, false)
		}
		return
	}
	p.line("Pending tool uses (%d), as Reconcile decides them now", len(pending))
	var ledger []*savepointv1.Effect
	for _, r := range v.reconcile.GetResolutions() {
		p.toolUse(r.GetToolUse(), r.GetBegun())
		if k := r.GetIdempotencyKey(); k != "" {
			p.line("    key       %s", k)
		}
		p.line("    decision  %s", decisionText(r))
		if res := r.GetResolution(); res != nil {
			p.line("    resolved  %s", resolutionText(res))
		}
		if a := r.GetApproval(); a != nil {
			p.line("    approval  %s", approvalText(a))
		}
		if l := v.ledger[r.GetToolUse().GetToolUseId()]; l != nil {
			for _, s := range earlierDecisions(l.GetResolutions(), l.GetApprovals(), l.GetApproval()) {
				p.line("    earlier   %s", s)
			}
		}
		if t := r.GetToolResultText(); t != "" {
			p.line("    result    %s", t)
		}
		if r.GetEffect() != nil {
			ledger = append(ledger, r.GetEffect())
		}
	}
	p.line("")
	p.line("Effects recorded for the pending tool uses (%d)", len(ledger))
	for _, eff := range ledger {
		p.effect(eff)
	}
}

// effect prints one ledger entry and its output, a line at a time.
func (p *printer) effect(eff *savepointv1.Effect) {
	var flags []string
	if eff.GetIsError() {
		flags = append(flags, "error")
	}
	if eff.GetRefused() {
		flags = append(flags, "refused, never ran")
	}
	if eff.GetLate() {
		flags = append(flags, "late")
	}
	extra := ""
	if len(flags) > 0 {
		extra = " (" + strings.Join(flags, ", ") + ")"
	}
	p.line("  %s  %s  recorded %s%s", eff.GetToolUseId(), eff.GetName(), formatTime(eff.GetRecordTime()), extra)
	for i, l := range strings.Split(eff.GetOutput(), "\n") {
		if i == 0 {
			p.line("    output    %s", l)
		} else {
			p.line("              %s", l)
		}
	}
	if res := eff.GetResolution(); res != nil {
		p.line("    resolved  %s", resolutionText(res))
	}
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *printer) toolUse(u *savepointv1.ToolUse, begun bool) {
	attrs := []string{effectClassText(u.GetEffectClass())}
	if u.GetBeginTracked() {
		attrs = append(attrs, "begin-tracked")
	}
	if begun {
		attrs = append(attrs, "begun")
	}
	p.line("  %s  %s  %s", u.GetToolUseId(), u.GetName(), strings.Join(attrs, ", "))
	input := u.GetInputJson()
	if input == "" {
		input = "{}"
	}
	p.line("    input     %s", compact(input))
}

func effectClassText(c savepointv1.EffectClass) string {
	switch c {
	case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return "read-only"
	case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return "idempotent"
	}
	return "side effect"
}

// decisionText is the decision with the rule that made it (daemon/reconcile.go).
func decisionText(r *savepointv1.Resolution) string {
	switch r.GetDecision() {
	case savepointv1.Decision_DECISION_REUSE:
		return "REUSE: the recorded effect is the tool result"
	case savepointv1.Decision_DECISION_RUN:
		if r.GetResolution().GetOutcome() == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE {
			return "RUN: resolved as not done, run it again with its idempotency key"
		}
		switch r.GetToolUse().GetEffectClass() {
		case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
			return "RUN: read-only, safe to run again"
		case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
			return "RUN: idempotent, run it with its idempotency key"
		}
		return "RUN: never begun, so it never ran"
	case savepointv1.Decision_DECISION_IN_DOUBT:
		if r.GetBegun() {
			return "IN_DOUBT: begun, outcome unknown; check the world, then savepoint resolve"
		}
		return "IN_DOUBT: not begin-tracked, outcome unknown; check the world, then savepoint resolve"
	}
	return r.GetDecision().String()
}
