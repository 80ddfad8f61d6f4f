package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"

	"github.com/savepoint-dev/savepoint/internal/cli"
)

func init() {
	register(&command{
		name:     "rewind",
		example:  `savepoint rewind report-1 --revision 1 --take-over`,
		synopsis: "SESSION --revision N (--epoch N | --take-over)",
		summary:  "make an old revision of a session its latest again, listing what it did since",
		help: `
Makes a new latest revision of SESSION equal to revision N (RewindSession):
its history, pending tool uses and state. Every revision stays readable,
and the ledger is kept: a tool use pending at N that was recorded since stays
recorded, so the next Reconcile reuses it instead of running it again.

It lists the side effects performed after revision N, as fork does: tell
the model about them before it continues.

Like every write it is fenced, so it needs the session's current epoch:
--epoch N passes it (0 only for a session never resumed). --take-over
instead calls Resume first, which takes ownership of the session and so
FENCES the agent that runs it now: its next save fails with SESSION_FENCED.`,
		setup: setupRewind,
	})
}

func setupRewind(fs *flag.FlagSet) runFunc {
	var w writeFlags
	w.register(fs)
	revision := fs.Uint64("revision", 0, "the kept revision `N` to make the latest again (required)")
	return func(ctx context.Context, e *env, args []string) error {
		id, err := sessionArg(args)
		if err != nil {
			return err
		}
		if *revision == 0 {
			return usagef("rewind needs --revision N, the kept revision to rewind to")
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
		r, err := c.Raw().RewindSession(ctx, &savepointv1.RewindSessionRequest{
			SessionId: id, Epoch: epoch, Revision: *revision, RequestId: uuid.NewString(),
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "rewound %s to revision %d: revision %d, epoch %d, %s\n",
			id, *revision, r.GetRevision(), r.GetEpoch(), cli.Count(r.GetMessageCount(), "message"))
		return printAfter(e.stdout, id, r.GetPerformedAfter(), r.GetInDoubtAfter(), r.GetListsTruncated())
	}
}
