package main

import (
	"context"
	"flag"
	"fmt"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "rm",
		example:  `savepoint rm report-1 --epoch 3`,
		synopsis: "SESSION (--epoch N | --take-over)",
		summary:  "delete a session: its checkpoints, history and ledger",
		help: `
Deletes a session's checkpoints, history and ledger together (DeleteSession).
The daemon keeps a tombstone, so a process still holding the old epoch stays
fenced, and a session re-created under the same id starts above it.

A delete is fenced like a save, so it needs the session's current epoch:
--epoch N passes it (0 only for a session never resumed). --take-over
instead calls Resume first, which takes ownership of the session and so
FENCES the agent that runs it now: its next save fails with SESSION_FENCED.
Use it for a session whose agent is gone, or that you mean to stop.`,
		setup: setupRm,
	})
}

func setupRm(fs *flag.FlagSet) runFunc {
	var w writeFlags
	w.register(fs)
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
		r, err := c.Raw().DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: id, Epoch: epoch})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "deleted %s (tombstone epoch %d)\n", id, r.GetTombstoneEpoch())
		return err
	}
}
