package main

import (
	"context"
	"flag"
	"fmt"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"

	"github.com/savepoint-dev/savepoint/internal/cli"
)

func init() {
	register(&command{
		name:     "verify",
		example:  `savepoint verify`,
		synopsis: "",
		summary:  "check every stored record of the running daemon (the Verify RPC)",
		help: `
Asks the running daemon to read every stored record, checking its checksum
and that each session's latest revision and history are complete, and prints
what it checked and each damaged session. It writes nothing, and serving goes
on meanwhile. Exit 4 when damage is found. (savepointd verify is the offline
form, for a data directory no daemon is serving.)`,
		setup: setupVerify,
	})
}

func setupVerify(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("verify takes no arguments, got %q", args[0])
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		r, err := c.Raw().Verify(ctx, &savepointv1.VerifyRequest{})
		if err != nil {
			return err
		}
		p := &printer{w: e.stdout}
		p.line("checked %s, %s", cli.Count(r.GetCheckedSessions(), "session"), cli.Count(r.GetCheckedRecords(), "record"))
		for _, d := range r.GetDamagedSessions() {
			id := d.GetSessionId()
			if id == "" {
				id = "(outside any session)"
			}
			p.line("damaged  %s: %s", id, oneLine(d.GetProblem()))
		}
		if p.err != nil {
			return p.err
		}
		if n := len(r.GetDamagedSessions()); n > 0 {
			return fmt.Errorf("%w (%s above); read what you can with savepoint show or export, then savepoint rm the sessions", errDamage, cli.Count(n, "entry"))
		}
		p.line("no damage found")
		return p.err
	}
}
