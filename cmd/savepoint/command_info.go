package main

import (
	"context"
	"flag"
	"fmt"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "info",
		example:  `savepoint info`,
		synopsis: "",
		summary:  "describe the running daemon: version, store, limits (GetServerInfo)",
		help: `
Prints what the running daemon says about itself (GetServerInfo): the
address asked, its version, its store and on-disk format, the size limits
it enforces, and when it started serving (UTC).`,
		setup: setupInfo,
	})
}

func setupInfo(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("info takes no arguments, got %q", args[0])
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		r, err := c.Raw().GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
		if err != nil {
			return err
		}
		p := &printer{w: e.stdout}
		p.line("address          %s", e.addr())
		p.line("version          %s", r.GetVersion())
		p.line("store            %s, format %d", r.GetStoreKind(), r.GetStoreFormat())
		started := formatTime(r.GetStartTime())
		if r.GetStartedOnDemand() {
			started += ", started on demand by a client"
		}
		p.line("started          %s", started)
		p.line("max request      %s", bytesText(r.GetMaxRequestBytes()))
		p.line("max message      %s", bytesText(r.GetMaxMessageBytes()))
		p.line("max state        %s", bytesText(r.GetMaxStateBytes()))
		p.line("response budget  %s", bytesText(r.GetResponseBudgetBytes()))
		return p.err
	}
}

// bytesText prints a size in bytes, with MiB or KiB when it is a whole number of them.
func bytesText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
