package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"

	"github.com/savepoint-dev/savepoint/internal/cli"
)

func init() {
	register(&command{
		name:     "fork",
		example:  `savepoint fork report-1 report-1-retry --revision 1`,
		synopsis: "SESSION NEW_SESSION [--revision N]",
		summary:  "copy a session at a revision into a new session, listing what it did since",
		help: `
Makes NEW_SESSION a session of its own whose history, pending tool uses and
state are SESSION's at --revision (default: its latest), with the ledger
entries of the tool uses in that history (ForkSession). SESSION is only read.

It then lists the side effects SESSION performed after that revision: the
tool uses that are not read-only recorded since ("performed"), and those
begun since whose outcome is unknown ("in doubt"). The world already holds them:
tell the model about them in the fork, rather than letting it run them again.
The fork is not resumed; its first epoch is printed.`,
		setup: setupFork,
	})
}

func setupFork(fs *flag.FlagSet) runFunc {
	revision := fs.Uint64("revision", 0, "the kept revision `N` to fork from (default: the latest)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) != 2 {
			return usagef("want SESSION NEW_SESSION, got %s", cli.Count(len(args), "argument"))
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		r, err := c.Raw().ForkSession(ctx, &savepointv1.ForkSessionRequest{
			SourceSessionId: args[0], Revision: *revision, NewSessionId: args[1], RequestId: uuid.NewString(),
		})
		if err != nil {
			return err
		}
		from := "its latest revision"
		if *revision != 0 {
			from = fmt.Sprintf("revision %d", *revision)
		}
		fmt.Fprintf(e.stdout, "forked %s at %s into %s: revision %d, epoch %d, %s\n",
			args[0], from, args[1], r.GetRevision(), r.GetEpoch(), cli.Count(r.GetMessageCount(), "message"))
		return printAfter(e.stdout, args[0], r.GetPerformedAfter(), r.GetInDoubtAfter(), r.GetListsTruncated())
	}
}

// printAfter lists the side effects a branch's response names.
func printAfter(w io.Writer, source string, performed, inDoubt []*savepointv1.LedgerEntry, truncated bool) error {
	if len(performed)+len(inDoubt) == 0 {
		_, err := fmt.Fprintf(w, "%s performed no side effect after that revision\n", source)
		return err
	}
	fmt.Fprintf(w, "%s performed after that revision:\n", source)
	for _, e := range performed {
		outcome := "output"
		if e.GetEffect().GetIsError() {
			outcome = "error"
		}
		fmt.Fprintf(w, "  performed  %s %s (%s) at %s, %s %s\n", e.GetToolUseId(), e.GetName(), effectClassText(e.GetEffectClass()),
			formatTime(e.GetEffect().GetRecordTime()), outcome, quoteLine(e.GetEffect().GetOutput()))
	}
	for _, e := range inDoubt {
		fmt.Fprintf(w, "  in doubt   %s %s (%s) begun at %s, idempotency key %s, no recorded outcome\n", e.GetToolUseId(), e.GetName(),
			effectClassText(e.GetEffectClass()), formatTime(e.GetBeginTime()), e.GetIdempotencyKey())
	}
	if truncated {
		_, err := fmt.Fprintf(w, "  (more than one response holds: savepoint effects %s lists them all)\n", source)
		return err
	}
	return nil
}

// quoteLine quotes s on one line, cut to 80 runes.
func quoteLine(s string) string {
	r := []rune(s)
	if len(r) > 80 {
		return fmt.Sprintf("%q…", string(r[:80]))
	}
	return fmt.Sprintf("%q", s)
}
