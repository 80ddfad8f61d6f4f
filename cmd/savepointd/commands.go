package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/savepoint-dev/savepoint/internal/cli"
	"github.com/savepoint-dev/savepoint/internal/version"
)

// subcommand is one of savepointd's commands besides serving: its name, its
// positional arguments, the daemon flags it takes, and its help.
type subcommand struct {
	name    string
	args    string // the positional arguments' synopsis, such as "FILE"
	summary string // one line for savepointd --help
	help    string // the paragraph of savepointd NAME -h
	example string // a command line for savepointd NAME -h
	// flags names the daemon flags the command takes; nil for a command
	// with its own (migrate-store) or none (version).
	flags []string
	// minArgs and maxArgs bound the positional arguments; maxArgs -1 is any
	// number.
	minArgs, maxArgs int
}

// offlineFlags are the flags of every command that opens a stopped
// daemon's store. --store-url is among them so that a command the
// PostgreSQL store does not offer says why (refusedWithPostgres).
var offlineFlags = []string{"data-dir", "store-url", "encryption-key-file", "log-level", "log-format", "memory-limit"}

func withFlags(names ...string) []string {
	return append(append([]string{}, offlineFlags...), names...)
}

// subcommands are listed by savepointd --help in this order.
var subcommands = []*subcommand{
	{
		name:    "verify",
		summary: "check every record of a stopped daemon's store and print the report (exit 4 on damage)",
		help: `Reads every record of the store in --data-dir (its daemon stopped), or of
the PostgreSQL database --store-url, checks its checksum and that each
session's latest revision and history are complete, and prints the report
as JSON, as the Verify RPC returns it. It writes nothing. Exit 4 when a
session is damaged; a --data-dir that does not exist is an error (exit 2).`,
		example: "savepointd verify --data-dir /var/lib/savepoint",
		flags:   withFlags("accept-data-loss"),
	},
	{
		name:    "repair-manifest",
		summary: "remove the MANIFEST records of missing tables after Badger's failed-flush defect",
		help: `Removes from the Badger MANIFEST of --data-dir (its daemon stopped) the
records of table files that do not exist, which Badger's failed-flush
defect leaves behind (docs/reliability.md), and says what it removed; then
run savepointd verify.`,
		example: "savepointd repair-manifest --data-dir /var/lib/savepoint",
		flags:   withFlags(),
	},
	{
		name:    "backup",
		args:    "FILE",
		summary: "copy a stopped daemon's store into the new FILE (savepoint backup copies a running one)",
		help: `Writes every record of the store in --data-dir (its daemon stopped) to
FILE, which must not exist, readable by its owner only. The file is not
encrypted, whatever the store's key: keep it as safe as the data.
savepointd restore reads it.`,
		example: "savepointd backup /root/savepoint.bak --data-dir /var/lib/savepoint",
		flags:   withFlags("accept-data-loss"),
		minArgs: 1, maxArgs: 1,
	},
	{
		name:    "restore",
		args:    "[FILE...]",
		summary: "restore a full backup, then its incrementals in order, into a new --data-dir",
		help: `Builds a new store in --data-dir, which must be empty or not exist, from
backup files: a full one, then its incrementals, in the order they were
taken ("-" or no FILE: stdin). A FILE that does not exist is an error
(exit 2) before anything is created. An encrypted backup needs the store's
--encryption-key-file. Then run savepointd verify.`,
		example: "savepointd restore --data-dir /var/lib/savepoint-new full.bak inc-1.bak",
		flags:   withFlags("disk-reserve-bytes"),
		maxArgs: -1,
	},
	{
		name:    "migrate-store",
		summary: "copy a stopped daemon's embedded store into PostgreSQL and verify the copy",
		help: `Copies the embedded store in --data-dir (its daemon stopped; it is locked
meanwhile) into the PostgreSQL database --to, then compares every session
and graph thread on both sides and runs the database's Verify
(docs/operations.md, "Fleets: PostgreSQL").`,
		example: `savepointd migrate-store --data-dir /var/lib/savepoint --to "$SAVEPOINT_STORE_URL"`,
	},
	{
		name:    "version",
		summary: "print the version (as --version does)",
		help:    `Prints savepointd's version, as GetServerInfo reports it.`,
		example: "savepointd version",
	},
}

// lookupSubcommand returns the subcommand called name, or nil.
func lookupSubcommand(name string) *subcommand {
	for _, s := range subcommands {
		if s.name == name {
			return s
		}
	}
	return nil
}

// prefix is what the command's messages start with.
func (s *subcommand) prefix() string {
	if s == nil {
		return "savepointd"
	}
	return "savepointd " + s.name
}

// checkArgs says what is wrong with the positional arguments pos.
func (s *subcommand) checkArgs(pos []string) error {
	if s == nil {
		if len(pos) > 0 {
			return fmt.Errorf("unexpected arguments %q: serving takes none, and %q is not a command (savepointd --help lists them)", pos, pos[0])
		}
		return nil
	}
	switch {
	case len(pos) < s.minArgs:
		return fmt.Errorf("missing %s; usage: savepointd %s %s [flags]", s.args, s.name, s.args)
	case s.maxArgs >= 0 && len(pos) > s.maxArgs:
		if s.maxArgs == 0 {
			return fmt.Errorf("unexpected arguments %q: %s takes none (savepointd %s -h)", pos, s.name, s.name)
		}
		return fmt.Errorf("unexpected arguments %q after %s; usage: savepointd %s %s [flags]", pos[s.maxArgs:], s.args, s.name, s.args)
	}
	return nil
}

// subFlags returns the flag set of a subcommand: the flags of all that it
// names, sharing their values, so that the environment and the defaults
// apply to it as to serving.
func (s *subcommand) subFlags(all *flag.FlagSet) *flag.FlagSet {
	fs := flag.NewFlagSet(s.prefix(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, name := range s.flags {
		f := all.Lookup(name)
		fs.Var(f.Value, f.Name, strings.ReplaceAll(f.Usage, " (see Stores below)", ""))
	}
	return fs
}

// printCommandHelp writes savepointd NAME -h: the synopsis, what the
// command does, an example and its flags.
func printCommandHelp(w io.Writer, s *subcommand, fs *flag.FlagSet) {
	synopsis := s.name
	if s.args != "" {
		synopsis += " " + s.args
	}
	fmt.Fprintf(w, "Usage: savepointd %s [flags]\n\n%s\n\nExample:\n  %s\n", synopsis, s.help, s.example)
	if fs != nil {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// printUsage writes savepointd --help: the commands, then serving's flags,
// then storeHelp.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `savepointd keeps agent loops' checkpoints and side-effects ledger and serves them over gRPC.

Usage:
  savepointd [flags]                  serve the store
  savepointd COMMAND [ARGS] [flags]   flags and arguments in any order

Commands:
`)
	for _, s := range subcommands {
		fmt.Fprintf(w, "  %-16s %s\n", s.name, s.summary)
	}
	fmt.Fprint(w, "\n'savepointd COMMAND -h' shows a command's flags and an example.\n\nFlags (serving):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, storeHelp)
}

// flagError is a flag the flag set does not take or cannot parse.
type flagError struct{ err error }

func (f flagError) Error() string { return f.err.Error() }
func (f flagError) Unwrap() error { return f.err }

// errorLine is a command line error in one line; a flag error says where the
// flags are listed.
func errorLine(s *subcommand, err error) string {
	if _, ok := err.(flagError); !ok {
		return fmt.Sprintf("%s: %v", s.prefix(), err)
	}
	help := "savepointd --help"
	if s != nil {
		help = "savepointd " + s.name + " -h"
	}
	return fmt.Sprintf("%s: %s (%s lists the flags)", s.prefix(), strings.TrimSpace(err.Error()), help)
}

// runVersion is "savepointd version".
func runVersion(sub *subcommand, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(sub.prefix(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pos, err := cli.Interspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, sub, nil)
		return exitOK
	} else if err != nil {
		err = flagError{err}
	}
	if err == nil {
		err = sub.checkArgs(pos)
	}
	if err != nil {
		fmt.Fprintln(stderr, errorLine(sub, err))
		return exitConfig
	}
	fmt.Fprintln(stdout, "savepointd", version.String())
	return exitOK
}
