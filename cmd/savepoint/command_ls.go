package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "ls",
		example:  `savepoint ls --status active --idle 10m`,
		synopsis: "[--label KEY=VALUE]... [--status STATUS] [--pending] [--idle D] | --threads",
		summary:  "list the sessions: status, turn, revision, pending and in-doubt tool uses, last update",
		help: `
Lists every live session in session id order, one line each, from the
latest revision: its status (active, completed or failed), its turn and
revision, its pending tool uses, how many of them Reconcile would report as
in doubt right now (side-effecting tool uses whose outcome is unknown: they
need a person, "savepoint resolve", before the agent resumes), RESOLVED,
the tool uses in doubt settled so far by a tool's verify hook and by a
person ("1/2": one by verify, two by a person), AWAITING, the tool uses
waiting for a person's approval ("savepoint approve"), and when it was last saved
(UTC). A session whose record cannot be decoded is listed with
"damaged" so it can be found and deleted.

The filters combine: --label keeps the sessions carrying every given label,
--status those of one status, --pending those with pending tool uses, and
--idle D those not updated (saved or completed) for at least D, such as 10m.
"ls --status active --idle 10m" finds the sessions whose agent has probably
died, to resume them.

--watch then prints one line per session that changes (CHANGED, with its
status, turn, revision, pending and in-doubt tool uses) or leaves the
filters (REMOVED, deleted or no longer matching), as WatchSessions reports
them once durable, until interrupted; --timeout then bounds each RPC, not
the command.

--threads lists the LangGraph threads instead, in thread id order: their
ledger's calls, how many of them are in doubt (a node running one again
is told it may have run: "savepoint resolve --thread" settles it), RESOLVED
as for sessions (the calls whose latest attempt in doubt was resolved, by a
verify hook and by a person), AWAITING, the calls waiting for a person's
approval ("savepoint approve --thread"), and when each thread was last
written. It reads each thread's ledger, and takes none of the session
filters.`,
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
	status := fs.String("status", "", "only sessions of this `STATUS`: active, completed or failed")
	pending := fs.Bool("pending", false, "only sessions with pending tool uses")
	idle := fs.Duration("idle", 0, "only sessions not updated for at least `D`, such as 10m")
	watch := fs.Bool("watch", false, "after the list, print each session that changes, until interrupted (--timeout bounds each RPC)")
	threads := fs.Bool("threads", false, "list the graph threads, with their ledgers' calls in doubt and resolved, instead of the sessions")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("ls takes no arguments, got %q", args[0])
		}
		if *threads {
			if len(labels) > 0 || *status != "" || *pending || *idle != 0 || *watch {
				return usagef("--threads takes none of --label, --status, --pending, --idle and --watch")
			}
			c, err := e.client(ctx)
			if err != nil {
				return err
			}
			return printThreads(ctx, e, c)
		}
		req := &savepointv1.ListSessionsRequest{HasPendingToolUses: *pending}
		if len(labels) > 0 {
			req.LabelFilter = labels
		}
		if *status != "" {
			v, ok := savepointv1.SessionStatus_value["SESSION_STATUS_"+strings.ToUpper(*status)]
			if !ok || v == 0 {
				return usagef("--status wants active, completed or failed, not %q", *status)
			}
			req.StatusFilter = savepointv1.SessionStatus(v)
		}
		switch {
		case *idle < 0:
			return usagef("--idle must not be negative, not %v", *idle)
		case *idle > 0:
			req.MinIdle = durationpb.New(*idle)
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		if *watch {
			return watchSessions(e, c, req)
		}
		return printSessions(ctx, e, c, req)
	}
}

// resolvedCounts is ls's RESOLVED column: the calls in doubt resolved by
// a verify hook and by a person, as "V/P".
func resolvedCounts(s *savepointv1.SessionSummary) string {
	return fmt.Sprintf("%d/%d", s.GetResolvedByVerifyCount(), s.GetResolvedByPersonCount())
}

// printSessions prints the table of the sessions req selects.
func printSessions(ctx context.Context, e *env, c *client.Client, req *savepointv1.ListSessionsRequest) error {
	sums, err := c.ListSessionsMatching(ctx, req)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATUS\tTURN\tREVISION\tPENDING\tIN DOUBT\tRESOLVED\tAWAITING\tUPDATED")
	for _, s := range sums {
		if s.GetRevision() == 0 { // a head that could not be decoded
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\tdamaged\n", s.GetSessionId())
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", s.GetSessionId(), statusName(s.GetStatus()), s.GetTurn(), s.GetRevision(),
			s.GetPendingToolUseCount(), s.GetInDoubtToolUseCount(), resolvedCounts(s), s.GetAwaitingApprovalCount(), formatTime(s.GetUpdateTime()))
	}
	return tw.Flush()
}

// printThreads prints the table of the graph threads, with each ledger's
// counts.
func printThreads(ctx context.Context, e *env, c *client.Client) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tCALLS\tIN DOUBT\tRESOLVED\tAWAITING\tUPDATED")
	for token, first := "", true; first || token != ""; first = false {
		page, err := c.Graph().ListThreads(ctx, &savepointv1.ListThreadsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return err
		}
		for _, th := range page.GetThreads() {
			effects, err := c.ThreadEffects(ctx, th.GetThreadId())
			if err != nil {
				return err
			}
			n := cli.CountThreadLedger(effects)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d/%d\t%d\t%s\n", th.GetThreadId(), len(effects), n.InDoubt, n.ResolvedByVerify, n.ResolvedByPerson, n.AwaitingApproval, formatTime(th.GetUpdateTime()))
		}
		token = page.GetNextPageToken()
	}
	return tw.Flush()
}
