package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&command{
		name:     "ls",
		synopsis: "[--label KEY=VALUE]...",
		summary:  "list the sessions: turn, revision, pending and in-doubt tool uses, last update",
		help: `
Lists every live session in session id order, one line each, from the
latest revision: its turn and revision, its pending tool uses, how many of
them Reconcile would report as in doubt right now (side-effecting calls whose
outcome is unknown: they need a person before the agent resumes), and when it
was last saved (UTC). A session whose record cannot be decoded is listed with
"damaged" so it can be found and deleted. --label keeps the sessions carrying
every given label.`,
		setup: setupLs,
	})
}

// labelFlag collects repeated KEY=VALUE flags.
type labelFlag map[string]string

func (l labelFlag) String() string { return "" }

func (l labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, not %q", s)
	}
	l[k] = v
	return nil
}

func setupLs(fs *flag.FlagSet) runFunc {
	labels := labelFlag{}
	fs.Var(labels, "label", "only sessions with this label, as KEY=VALUE (repeatable)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("ls takes no arguments, got %q", args[0])
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		var filter map[string]string
		if len(labels) > 0 {
			filter = labels
		}
		sums, err := c.ListSessions(ctx, filter)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tTURN\tREVISION\tPENDING\tIN DOUBT\tUPDATED")
		for _, s := range sums {
			if s.GetRevision() == 0 { // a head that could not be decoded
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tdamaged\n", s.GetSessionId())
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", s.GetSessionId(), s.GetTurn(), s.GetRevision(),
				s.GetPendingToolUseCount(), s.GetInDoubtToolUseCount(), formatTime(s.GetUpdateTime()))
		}
		return tw.Flush()
	}
}
