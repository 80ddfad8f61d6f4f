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
		synopsis: "SESSION",
		summary:  "list a session's ledger: begin markers, recorded effects, late records",
		help: `
Lists the ledger of a session (ListEffects), one line per tool use that was
begun or has a recorded effect, in tool use id order: its name and effect
class, the last revision in which it was pending, whether it was begun (and
when), and its recorded outcome, "late" when the record arrived after the
call stopped being pending. A begun call with no outcome that is still
pending is in doubt; show says what Reconcile decides for it. It reads only.`,
		setup: setupEffects,
	})
}

func setupEffects(*flag.FlagSet) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
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
					if eff.GetLate() {
						outcome += " (late)"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.GetToolUseId(), l.GetName(), effectClassText(l.GetEffectClass()),
					l.GetLastPendingRevision(), begun, recorded, outcome)
			}
			token = page.GetNextPageToken()
		}
		return tw.Flush()
	}
}
