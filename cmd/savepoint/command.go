package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
)

// command is one subcommand. Each lives in its own command_NAME.go file and
// registers itself from init, so a new command is one more file.
type command struct {
	name     string
	synopsis string // the arguments after the name, as in "SESSION [--revision N]"
	summary  string // one line for the command list
	help     string // the paragraphs of `savepoint help NAME`
	example  string // a command line for `savepoint help NAME`
	// setup registers the command's own flags on fs and returns the function
	// that runs it with the positional arguments once fs is parsed.
	setup func(fs *flag.FlagSet) runFunc
}

type runFunc func(ctx context.Context, e *env, args []string) error

var commands []*command

func register(c *command) {
	commands = append(commands, c)
	slices.SortFunc(commands, func(a, b *command) int { return strings.Compare(a.name, b.name) })
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// env is what a running command uses: its configuration, output and client.
type env struct {
	cfg    Config
	stdout io.Writer
	stderr io.Writer // for progress lines; errors are app.run's to print
	c      *client.Client
	// untimed is the command's context without --timeout, for the commands
	// that run until interrupted (ui, ls --watch): their --timeout bounds
	// each RPC instead.
	untimed context.Context
}

// client dials the daemon on first use; the connection is closed by app.run.
// It names the address, even the default, so that inspecting never starts
// a daemon on demand: an empty daemon would hide the one looked for.
func (e *env) client(ctx context.Context) (*client.Client, error) {
	if e.c == nil {
		c, err := client.Dial(ctx, e.addr(), client.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return nil, err
		}
		e.c = c
	}
	return e.c, nil
}

// addr is the address the command talks to, for messages.
func (e *env) addr() string {
	if e.cfg.Addr == "" {
		return client.DefaultAddr()
	}
	return e.cfg.Addr
}

type app struct {
	stdout, stderr io.Writer
}

func newApp(stdout, stderr io.Writer) *app { return &app{stdout: stdout, stderr: stderr} }

func (a *app) run(ctx context.Context, args []string) int {
	cfg := DefaultConfig()
	top := flag.NewFlagSet("savepoint", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	cfg.register(top)
	showVersion := top.Bool("version", false, "print the version and exit")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.usage(a.stdout)
			return exitOK
		}
		return a.fail("", usagef("%v", err))
	}
	if *showVersion {
		fmt.Fprintln(a.stdout, versionLine())
		return exitOK
	}
	args = top.Args()
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	if name == "help" {
		return a.help(args)
	}
	cmd := lookup(name)
	if cmd == nil {
		return a.fail("", usagef("unknown command %q", name))
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.register(fs)
	runCmd := cmd.setup(fs)
	pos, err := cli.Interspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		a.commandHelp(a.stdout, cmd)
		return exitOK
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return a.fail(name, &usageError{msg: err.Error()})
	}
	untimed := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	e := &env{cfg: cfg, stdout: a.stdout, stderr: a.stderr, untimed: untimed}
	err = runCmd(ctx, e, pos)
	if e.c != nil {
		e.c.Close()
	}
	if err != nil {
		return a.failAt(name, pos, e.addr(), err)
	}
	return exitOK
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `savepoint inspects the sessions of a running savepointd.

Usage:
  savepoint [--addr ADDR] [--timeout D] COMMAND [ARGS]   flags and arguments in any order
  savepoint --version

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help     describe a command, with its flags and an example: savepoint help COMMAND (or COMMAND -h)

Every command takes --addr (default: $SAVEPOINT_ADDR, else
unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock, else
unix:/run/savepoint/savepoint.sock) and --timeout (default 30s; it bounds
the whole command, but each RPC of ui and ls --watch). savepointd verify is the offline check of a stopped daemon's data directory.

`+exitCodesHelp)
}

func (a *app) help(args []string) int {
	if len(args) == 0 {
		a.usage(a.stdout)
		return exitOK
	}
	cmd := lookup(args[0])
	if cmd == nil || len(args) > 1 {
		return a.fail("help", usagef("no command %q", strings.Join(args, " ")))
	}
	a.commandHelp(a.stdout, cmd)
	return exitOK
}

func (a *app) commandHelp(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: savepoint %s %s\n\n%s\n\nExample:\n  %s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help), cmd.example)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cfg := DefaultConfig()
	cfg.register(fs)
	cmd.setup(fs)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+exitCodesHelp)
}
