package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"time"

	"github.com/savepoint-dev/savepoint/cmd/savepoint/internal/ui"
)

func init() {
	register(&command{
		name:     "ui",
		example:  `savepoint ui --open`,
		synopsis: "[--listen HOST:PORT] [--open] [--read-only]",
		summary:  "serve the web inspector on loopback: sessions, timelines, ledger, graph threads, actions",
		help: `
Serves the web inspector on a loopback address (--listen, default
127.0.0.1:0, a free port) until interrupted, and prints one line: its URL,
which carries a random token. Treat the URL as a secret: whoever holds the
token acts as you on the daemon. The first visit moves the token into a
cookie and drops it from the address bar; a request without it gets 401.

--open starts the desktop's browser ($BROWSER, else xdg-open) on a 0600
redirect file, so that the token is never on a command line. --read-only
serves the pages without their actions (fork, rewind, complete, delete,
resolving a call in doubt, approving or denying a call, graph copy, prune
and delete). A call resolved, approved or denied from the inspector is
recorded as a person's decision under your user name unless its form names
another. --timeout bounds each RPC the inspector makes,
not the command.`,
		setup: setupUI,
	})
}

func setupUI(fs *flag.FlagSet) runFunc {
	listen := fs.String("listen", "127.0.0.1:0", "the loopback `HOST:PORT` to serve on (port 0: a free one)")
	open := fs.Bool("open", false, "open the inspector in the desktop's browser, through a 0600 redirect file")
	readOnly := fs.Bool("read-only", false, "serve the pages without their actions")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("ui takes no arguments, got %q", args[0])
		}
		if err := ui.CheckListen(*listen); err != nil {
			return usagef("%s", err.Error())
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		person := ""
		if u, err := user.Current(); err == nil {
			person = u.Username
		}
		srv, err := ui.New(ui.Options{Client: c, DaemonAddr: e.addr(), ReadOnly: *readOnly, Timeout: e.cfg.Timeout, Person: person})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", *listen, err)
		}
		url := srv.URL(ln.Addr())
		fmt.Fprintln(e.stdout, url)
		if *open {
			if path := openBrowser(e, url); path != "" {
				defer os.Remove(path)
			}
		}
		ctx = e.untimed
		// Requests see the interrupt, so live event streams end with it.
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
		done := make(chan error, 1)
		go func() { done <- hs.Serve(ln) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// openBrowser starts the desktop's browser on a redirect file holding url
// and returns the file's path, to remove when the inspector stops (as
// Jupyter does); failing that, it says why on stderr and returns "", and
// the printed URL remains.
func openBrowser(e *env, url string) string {
	path, err := ui.WriteRedirectFile("", url)
	if err == nil {
		var cmd *exec.Cmd
		if cmd, err = ui.BrowserCommand(path, os.Getenv, exec.LookPath); err == nil {
			if err = cmd.Start(); err == nil {
				go cmd.Wait()
				return path
			}
		}
		os.Remove(path)
	}
	fmt.Fprintf(e.stderr, "savepoint ui: --open: %v\n", err)
	return ""
}
