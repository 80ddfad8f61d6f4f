package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "complete",
		example:  `savepoint complete report-1 --take-over --output "report.md written and mailed"`,
		synopsis: "SESSION (--epoch N | --take-over) [--failed] [--output TEXT]",
		summary:  "mark a session completed or failed, with its final output",
		help: `
Marks a session completed, or failed with --failed, storing --output as its
final output (CompleteSession). No revision is made. From then on the
daemon refuses the session's saves and BeginEffect with SESSION_COMPLETED,
and a Resume returns it without taking it over, so an orchestrator does not
restart finished work; a Resume with reopen makes it active again.
Completing it again with the same status and output succeeds and says so;
another status or output is refused.

Like every write it is fenced, so it needs the session's current epoch:
--epoch N passes it (0 only for a session never resumed). --take-over
instead calls Resume first, which takes ownership of an active session and
so FENCES the agent that runs it now: its next save fails with
SESSION_FENCED. Use it for a session whose agent is gone.`,
		setup: setupComplete,
	})
}

func setupComplete(fs *flag.FlagSet) runFunc {
	var w writeFlags
	w.register(fs)
	failed := fs.Bool("failed", false, "mark the session failed rather than completed")
	output := fs.String("output", "", "the session's final `TEXT`: what the agent produced, or why it failed")
	return func(ctx context.Context, e *env, args []string) error {
		id, err := sessionArg(args)
		if err != nil {
			return err
		}
		if err := w.check(); err != nil {
			return err
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		epoch, err := w.ownEpoch(ctx, c.Raw(), id)
		if err != nil {
			return err
		}
		st := savepointv1.SessionStatus_SESSION_STATUS_COMPLETED
		if *failed {
			st = savepointv1.SessionStatus_SESSION_STATUS_FAILED
		}
		r, err := c.Raw().CompleteSession(ctx, &savepointv1.CompleteSessionRequest{
			SessionId: id, Epoch: epoch, Status: st, FinalOutput: *output, RequestId: uuid.NewString(),
		})
		if err != nil {
			return err
		}
		what := "marked"
		if r.GetAlreadyCompleted() {
			what = "was already"
		}
		_, err = fmt.Fprintf(e.stdout, "%s %s %s at revision %d (epoch %d)\n", id, what, statusName(r.GetStatus()), r.GetRevision(), r.GetEpoch())
		return err
	}
}

// statusName is a status as the CLI prints it: "active", "completed",
// "failed"; "-" for none.
func statusName(s savepointv1.SessionStatus) string {
	name, ok := strings.CutPrefix(s.String(), "SESSION_STATUS_")
	if !ok || s == savepointv1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return "-"
	}
	return strings.ToLower(name)
}
