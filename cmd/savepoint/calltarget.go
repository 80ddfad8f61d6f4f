package main

import (
	"flag"
	"os/user"
)

// callTarget is the tool use a command acts on, named by SESSION
// TOOL_USE_ID, or by --thread THREAD [--ns NS] TOOL_USE_ID for a call of a
// graph thread's ledger; approve and resolve take it.
type callTarget struct {
	thread, ns *string
	// session and toolUseID are set by parse; session is empty for a
	// thread's call.
	session, toolUseID string
}

// callTargetFlags adds --thread and --ns to fs, their help saying that the
// command will verb a call of the thread's ledger.
func callTargetFlags(fs *flag.FlagSet, verb string) *callTarget {
	return &callTarget{
		thread: fs.String("thread", "", verb+" a call of the graph thread `THREAD`'s ledger instead of a session's"),
		ns:     fs.String("ns", "", "with --thread: the call's checkpoint namespace `NS` (empty: the root graph)"),
	}
}

// parse reads the positional arguments; a wrong count, or --ns without
// --thread, is a usage error.
func (c *callTarget) parse(args []string) error {
	c.session, c.toolUseID = "", ""
	switch {
	case *c.thread != "" && len(args) == 1:
		c.toolUseID = args[0]
	case *c.thread != "":
		return usagef("with --thread, want TOOL_USE_ID, got %d arguments", len(args))
	case *c.ns != "":
		return usagef("--ns goes with --thread only")
	case len(args) == 2:
		c.session, c.toolUseID = args[0], args[1]
	default:
		return usagef("want SESSION TOOL_USE_ID, got %d arguments", len(args))
	}
	return nil
}

// where names the call's ledger in the commands' output: the session, or
// "thread THREAD [namespace NS]".
func (c *callTarget) where() string {
	if *c.thread == "" {
		return c.session
	}
	s := "thread " + *c.thread
	if *c.ns != "" {
		s += " namespace " + *c.ns
	}
	return s
}

// byOrUser is by, or when it is empty the current user's name ("" when
// that is unknown).
func byOrUser(by string) string {
	if by == "" {
		if u, err := user.Current(); err == nil {
			return u.Username
		}
	}
	return by
}
