package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
)

// Exit codes, as `savepoint help` and docs/operations.md list them.
const (
	exitOK          = 0
	exitFail        = 1 // the daemon refused or failed the request, or output failed
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3 // no such session or graph thread, or the revision is not kept
	exitDamaged     = 4 // verify found damage, or the session's data is corrupt
	exitUnavailable = 5 // the daemon cannot be reached, or the timeout passed
	exitFenced      = 6 // a write's --epoch is stale: another process resumed the session
)

const exitCodesHelp = `Exit codes:
  0  success
  1  the daemon refused or failed the request
  2  usage: bad flags or arguments
  3  no such session or graph thread, or the revision is not kept
  4  verify found damage, or the session's stored data is corrupt
  5  the daemon cannot be reached, or --timeout passed
  6  fenced: --epoch is stale (another process resumed the session)
`

// usageError is a mistake in the command line: exit 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errDamage says verify found damage: exit 4, after the report is printed.
var errDamage = errors.New("damage found")

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
	if len(args) > 0 {
		reason = forPeople(err, args[0], reason)
	}
	fmt.Fprintf(a.stderr, "savepoint: %s: %s\n", what, reason)
	return code
}

// forPeople replaces the daemon's text of an error, written for the program
// that made the call, with what a person at the command line types next:
// session is the command's SESSION argument.
func forPeople(err error, session, reason string) string {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return reason
	}
	if ce.Reason == "SESSION_NOT_FOUND" {
		return fmt.Sprintf("no session %q: it was never saved, or it was deleted; savepoint ls lists the sessions kept (SESSION_NOT_FOUND)", session)
	}
	return reason
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
	case errors.Is(err, client.ErrSessionNotFound), errors.Is(err, client.ErrRevisionNotFound), errors.Is(err, errThreadNotFound):
		return exitNotFound, reason
	case errors.Is(err, client.ErrCheckpointCorrupt):
		return exitDamaged, reason
	case errors.Is(err, client.ErrSessionFenced):
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
