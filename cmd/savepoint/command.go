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
	"time"

	"github.com/savepoint-dev/savepoint/client"
)

// Exit codes, as `savepoint help` and docs/operations.md list them.
const (
	exitOK          = 0
	exitFail        = 1 // the daemon refused or failed the request, or output failed
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3 // no such session, or the revision is not kept
	exitDamaged     = 4 // verify found damage, or the session's data is corrupt
	exitUnavailable = 5 // the daemon cannot be reached, or the timeout passed
	exitFenced      = 6 // a write's --epoch is stale: another process resumed the session
)

const exitCodesHelp = `Exit codes:
  0  success
  1  the daemon refused or failed the request
  2  usage: bad flags or arguments
  3  no such session, or the revision is not kept
  4  verify found damage, or the session's stored data is corrupt
  5  the daemon cannot be reached, or --timeout passed
  6  fenced: --epoch is stale (another process resumed the session)
`

// Config is what every command needs to reach the daemon.
type Config struct {
	// Addr is the daemon's address, "unix:PATH" or "HOST:PORT"; empty means
	// client.DefaultAddr() ($SAVEPOINT_ADDR, then the runtime directory's
	// socket).
	Addr string
	// Timeout bounds the whole command; zero is invalid.
	Timeout time.Duration
}

// DefaultConfig returns the configuration used when no flag is given.
func DefaultConfig() Config { return Config{Timeout: 30 * time.Second} }

// Validate reports a configuration no command can run with.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, not %v", c.Timeout)
	}
	if err := client.ValidateAddr(c.Addr); err != nil {
		return fmt.Errorf("--addr: %s", strings.TrimPrefix(err.Error(), "savepoint: "))
	}
	return nil
}

// register adds the flags every command accepts, before or after its name.
func (c *Config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "the daemon's address, unix:PATH or HOST:PORT (default: $SAVEPOINT_ADDR, else the runtime directory's socket)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "give up on the whole command after this long")
}

// command is one subcommand. Each lives in its own command_NAME.go file and
// registers itself from init, so a new command is one more file.
type command struct {
	name     string
	synopsis string // the arguments after the name, as in "SESSION [--revision N]"
	summary  string // one line for the command list
	help     string // the paragraphs of `savepoint help NAME`
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
	stderr io.Writer
	c      *client.Client
}

// client dials the daemon on first use; the connection is closed by app.run.
func (e *env) client(ctx context.Context) (*client.Client, error) {
	if e.c == nil {
		c, err := client.Dial(ctx, e.cfg.Addr, client.WithLogger(slog.New(slog.DiscardHandler)))
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

// usageError is a mistake in the command line: exit 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// damageError says verify found damage: exit 4, after the report is printed.
var errDamage = errors.New("damage found")

type app struct {
	stdout, stderr io.Writer
}

func newApp(stdout, stderr io.Writer) *app { return &app{stdout: stdout, stderr: stderr} }

func (a *app) run(ctx context.Context, args []string) int {
	cfg := DefaultConfig()
	top := flag.NewFlagSet("savepoint", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	cfg.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.usage(a.stdout)
			return exitOK
		}
		return a.fail("", usagef("%v", err))
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
	pos, err := parseInterspersed(fs, args)
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
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	e := &env{cfg: cfg, stdout: a.stdout, stderr: a.stderr}
	err = runCmd(ctx, e, pos)
	if e.c != nil {
		e.c.Close()
	}
	if err != nil {
		return a.failAt(name, pos, e.addr(), err)
	}
	return exitOK
}

// parseInterspersed parses fs from args, allowing flags after positional
// arguments (`savepoint show ID --revision 2`); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// Parse stops before the first positional argument, or just after a
		// "--", which it consumes.
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// fail prints a usage error in one line, with where to read more, and
// returns exit 2.
func (a *app) fail(name string, err error) int {
	if name == "" {
		fmt.Fprintf(a.stderr, "savepoint: %s (see 'savepoint help')\n", oneLine(err.Error()))
	} else {
		fmt.Fprintf(a.stderr, "savepoint: %s: %s (see 'savepoint help %s')\n", name, oneLine(err.Error()), name)
	}
	return exitUsage
}

// failAt prints a command's error as `savepoint: NAME ARGS: REASON` and
// returns its exit code.
func (a *app) failAt(name string, args []string, addr string, err error) int {
	var u *usageError
	if errors.As(err, &u) {
		return a.fail(name, err)
	}
	what := strings.Join(append([]string{name}, args...), " ")
	code, reason := classify(err, addr)
	fmt.Fprintf(a.stderr, "savepoint: %s: %s\n", what, reason)
	return code
}

// classify maps a command's error to its exit code and a one-line reason.
func classify(err error, addr string) (int, string) {
	reason := oneLine(strings.TrimPrefix(err.Error(), "savepoint: "))
	var ce *client.Error
	if errors.As(err, &ce) {
		reason = oneLine(ce.Message)
		if ce.Reason != "" {
			reason += " (" + ce.Reason + ")"
		} else {
			reason += " (" + ce.Code.String() + ")"
		}
	}
	switch {
	case errors.Is(err, errDamage):
		return exitDamaged, reason
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrRevisionNotFound):
		return exitNotFound, reason
	case errors.Is(err, client.ErrCorrupt):
		return exitDamaged, reason
	case errors.Is(err, client.ErrFenced):
		return exitFenced, reason + "; pass the current --epoch, or --take-over"
	case errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable, "no answer within --timeout from savepointd at " + addr + ": " + reason
	case errors.Is(err, client.ErrUnavailable):
		return exitUnavailable, "cannot reach savepointd at " + addr + ": " + reason
	}
	return exitFail, reason
}

// oneLine joins the lines of s, so every error is one line on stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `savepoint inspects the sessions of a running savepointd.

Usage:
  savepoint [--addr ADDR] [--timeout D] COMMAND [ARGS]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help     describe a command: savepoint help COMMAND

Every command takes --addr (default: $SAVEPOINT_ADDR, else
unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock, else
unix:/run/savepoint/savepoint.sock) and --timeout (default 30s).
savepointd verify is the offline check of a stopped daemon's data directory.

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
	fmt.Fprintf(w, "Usage: savepoint %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cfg := DefaultConfig()
	cfg.register(fs)
	cmd.setup(fs)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+exitCodesHelp)
}
