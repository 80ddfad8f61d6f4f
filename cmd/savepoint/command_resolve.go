package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "resolve",
		example:  `savepoint resolve report-1 toolu_02 --done --output "sent to team@example.com" --note "in the mail server's log"`,
		synopsis: "(SESSION | --thread THREAD [--ns NS]) TOOL_USE_ID (--done [--output TEXT | --output-file F] [--error] | --not-done) [--note TEXT] [--by NAME]",
		summary:  "record what a person found about a tool use in doubt: done, with its output, or not done",
		help: `
Records what you found about a tool use in doubt (ResolveEffect): a
side-effecting call pending in the session's latest revision whose outcome
is unknown, because its agent stopped after starting it and before its
outcome was recorded ("savepoint show" lists them as IN_DOUBT).

--done says the call took effect: --output TEXT (or --output-file F, "-"
for standard input) is what it returned, or with --error its error text. It
becomes the call's recorded effect, so the agent's next resume reuses it as
the tool result instead of telling the model the outcome is unknown.

--not-done says it did not take effect: the agent's next resume runs it
again, as a new attempt with the same idempotency key.

The resolution is kept with --note and --by (default: your user name) and
the daemon's time; "savepoint effects" and "savepoint show" print it. It is
a finding, not a write of the agent's, so it needs no epoch and fences no
one. The first resolution stands: the same finding again succeeds and says
so, another one is refused. A call that is not in doubt is refused.

--thread THREAD resolves a call of a LangGraph thread's ledger instead
(ResolveThreadEffect), in namespace --ns (empty: the root graph): the next
run of the node that made the call reuses the output (recorded as a JSON
string), or, for --not-done, runs it again as a new attempt under the same
idempotency key. "savepoint effects --thread" lists the calls in doubt.`,
		setup: setupResolve,
	})
}

func setupResolve(fs *flag.FlagSet) runFunc {
	done := fs.Bool("done", false, "the call took effect; its output is recorded as its effect")
	notDone := fs.Bool("not-done", false, "the call did not take effect; the next resume runs it again")
	output := fs.String("output", "", "with --done: the call's output `TEXT`")
	outputFile := fs.String("output-file", "", "with --done: read the call's output from `FILE` (- for standard input)")
	isError := fs.Bool("error", false, "with --done: the call took effect and failed; the output is its error text")
	note := fs.String("note", "", "a `TEXT` kept with the resolution, such as where you looked")
	by := fs.String("by", "", "who resolved the call (default: your user name)")
	call := callTargetFlags(fs, "resolve")
	return func(ctx context.Context, e *env, args []string) error {
		if err := call.parse(args); err != nil {
			return err
		}
		switch {
		case *done == *notDone:
			return usagef("give --done or --not-done")
		case *output != "" && *outputFile != "":
			return usagef("give --output or --output-file, not both")
		case *notDone && (*output != "" || *outputFile != "" || *isError):
			return usagef("--output, --output-file and --error go with --done only")
		}
		f := client.Finding{Done: *done, Output: *output, IsError: *isError, Note: *note, ResolvedBy: *by}
		if *outputFile != "" {
			b, err := readFileArg(*outputFile)
			if err != nil {
				return err
			}
			f.Output = string(b)
		}
		f.ResolvedBy = byOrUser(f.ResolvedBy)
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		if *call.thread != "" {
			return resolveThreadEffect(ctx, e, call, f)
		}
		r, err := c.ResolveEffect(ctx, call.session, call.toolUseID, f)
		if err != nil {
			return err
		}
		l := r.GetEntry()
		res := l.GetResolution()
		what := "resolved"
		if r.GetAlreadyResolved() {
			what = "was already resolved"
		}
		fmt.Fprintf(e.stdout, "%s %s (%s) %s %s\n", call.where(), l.GetToolUseId(), l.GetName(), what, resolutionText(res))
		if res.GetOutcome() == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE {
			_, err = fmt.Fprintln(e.stdout, "its output is recorded: the agent's next resume reuses it as the tool result")
		} else if k := l.GetIdempotencyKey(); k != "" {
			_, err = fmt.Fprintf(e.stdout, "the agent's next resume runs it again with idempotency key %s\n", k)
		} else {
			_, err = fmt.Fprintln(e.stdout, "the agent's next resume runs it again")
		}
		return err
	}
}

// resolveThreadEffect is resolve --thread.
func resolveThreadEffect(ctx context.Context, e *env, call *callTarget, f client.Finding) error {
	r, err := e.c.ResolveThreadEffect(ctx, *call.thread, *call.ns, call.toolUseID, f)
	if err != nil {
		return err
	}
	x := r.GetEffect()
	what := "resolved"
	if r.GetAlreadyResolved() {
		what = "was already resolved"
	}
	fmt.Fprintf(e.stdout, "%s %s (%s) attempt %d %s %s\n", call.where(), x.GetToolUseId(), x.GetName(), x.GetAttempts(), what, resolutionText(x.GetResolution()))
	if f.Done {
		_, err = fmt.Fprintln(e.stdout, "its output is recorded: the node's next run reuses it")
	} else {
		_, err = fmt.Fprintf(e.stdout, "the node's next run runs it again as attempt %d with idempotency key %s\n", x.GetAttempts()+1, x.GetIdempotencyKey())
	}
	return err
}

// resolutionText says what a resolution found, who found it and when, as
// in "done by alice (person) at TIME: note".
func resolutionText(r *savepointv1.EffectResolution) string {
	outcome := "not done"
	if r.GetOutcome() == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE {
		outcome = "done"
	}
	kind := "person"
	if r.GetResolverKind() == savepointv1.ResolverKind_RESOLVER_KIND_VERIFY {
		kind = "verify hook"
	}
	s := fmt.Sprintf("%s by %s (%s) at %s", outcome, orDash(r.GetResolvedBy()), kind, formatTime(r.GetResolveTime()))
	if n := r.GetNote(); n != "" {
		s += ": " + quoteLine(n)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// readFileArg reads the file name names, or standard input for "-".
func readFileArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// earlierDecisions says, a line each, the resolutions and approval
// decisions of a call before its current ones (rs and as are the
// LedgerEntry's or ThreadEffect's lists, whose last resolution is the
// current one, as is their last approval when approval is decided).
func earlierDecisions(rs []*savepointv1.EffectResolution, as []*savepointv1.EffectApproval, approval *savepointv1.EffectApproval) []string {
	var out []string
	rs, as = cli.Earlier(rs, as, approval)
	for _, r := range rs {
		out = append(out, "resolved "+resolutionText(r))
	}
	for _, a := range as {
		out = append(out, approvalText(a))
	}
	return out
}

// earlierOutcome is earlierDecisions as a suffix of a ledger table's
// OUTCOME column: "" when there are none.
func earlierOutcome(rs []*savepointv1.EffectResolution, as []*savepointv1.EffectApproval, approval *savepointv1.EffectApproval) string {
	d := earlierDecisions(rs, as, approval)
	if len(d) == 0 {
		return ""
	}
	return "; earlier: " + strings.Join(d, "; ")
}
