package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "effects",
		example:  `savepoint effects report-1`,
		synopsis: "SESSION | --thread THREAD",
		summary:  "list a session's or a graph thread's ledger: begin markers, recorded effects, late records",
		help: `
Lists the ledger of a session (ListEffects), one line per tool use that was
begun or has a recorded effect, in tool use id order: its name and effect
class, the last revision in which it was pending, whether it was begun (and
when), and its recorded effect, "late" when the record arrived after the
tool use stopped being pending. A begun tool use with no effect that is
still pending is in doubt; show says what Reconcile decides for it. It reads only.

--thread THREAD lists a LangGraph thread's ledger instead (ListThreadEffects:
the tool uses DurableToolNode and @durable ran), in namespace and tool use
id order: each tool use's effect class, its latest attempt and that
attempt's state (begun, succeeded, failed), and NEXT, what a node running
the tool use again is answered: REUSE the recorded result, RUN it (a failed
attempt, or a read-only or idempotent tool use begun without an outcome),
or IN_DOUBT (a side-effecting tool use begun without an outcome).`,
		setup: setupEffects,
	})
}

func setupEffects(fs *flag.FlagSet) runFunc {
	thread := fs.String("thread", "", "list the ledger of the graph thread `THREAD` instead of a session's")
	return func(ctx context.Context, e *env, args []string) error {
		if *thread != "" {
			if len(args) > 0 {
				return usagef("give SESSION or --thread, not both")
			}
			c, err := e.client(ctx)
			if err != nil {
				return err
			}
			effects, err := c.ThreadEffects(ctx, *thread)
			if err != nil {
				return err
			}
			return printThreadEffects(e.stdout, effects)
		}
		id, err := sessionArg(args)
		if err != nil {
			return err
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL USE\tNAME\tCLASS\tPENDING IN\tBEGUN\tRECORDED\tOUTCOME")
		for token, first := "", true; first || token != ""; first = false {
			page, err := c.Raw().ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: id, PageToken: token})
			if err != nil {
				return err
			}
			for _, l := range page.GetEntries() {
				begun, recorded, outcome := "-", "-", "none recorded"
				if l.GetBegun() {
					begun = formatTime(l.GetBeginTime())
				}
				if eff := l.GetEffect(); eff != nil {
					recorded = formatTime(eff.GetRecordTime())
					outcome = "output " + quoteLine(eff.GetOutput())
					if eff.GetIsError() {
						outcome = "error " + quoteLine(eff.GetOutput())
					}
					if eff.GetRefused() {
						outcome = "refused, never ran: " + quoteLine(eff.GetOutput())
					}
					if eff.GetLate() {
						outcome += " (late)"
					}
				}
				if res := l.GetResolution(); res != nil {
					outcome += ", resolved " + resolutionText(res)
				}
				if a := l.GetApproval(); a != nil {
					outcome += ", " + approvalText(a)
				}
				outcome += earlierOutcome(l.GetResolutions(), l.GetApprovals(), l.GetApproval())
				if d := l.GetDuplicateOf(); d != "" {
					outcome = "not run: repeats " + d + " of an earlier run"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.GetToolUseId(), l.GetName(), effectClassText(l.GetEffectClass()),
					l.GetLastPendingRevision(), begun, recorded, outcome)
			}
			token = page.GetNextPageToken()
		}
		return tw.Flush()
	}
}
