package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/savepoint-dev/savepoint/internal/version"
)

func init() {
	register(&command{
		name:     "version",
		example:  `savepoint version`,
		synopsis: "",
		summary:  "print the version of this savepoint (savepoint info: the daemon's)",
		help: `
Prints the version of this savepoint command, as savepoint --version does.
It asks the daemon nothing: savepoint info prints the daemon's version.`,
		setup: setupVersion,
	})
}

func setupVersion(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("version takes no arguments, got %q", args[0])
		}
		_, err := fmt.Fprintln(e.stdout, versionLine())
		return err
	}
}

// versionLine is what savepoint --version and savepoint version print.
func versionLine() string { return "savepoint " + version.String() }
