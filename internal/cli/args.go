// Package cli holds what Savepoint's command-line programs (savepoint,
// savepointd) share in how they read arguments and word their output.
package cli

import "flag"

// Interspersed parses fs from args, allowing flags before, between and after
// the positional arguments (`savepointd restore --data-dir D full.bak
// inc.bak` and `savepointd restore full.bak inc.bak --data-dir D` alike), and
// returns the positional arguments in order. A lone "-" is a positional
// argument (stdin); "--" ends the flags, and everything after it is
// positional.
func Interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
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
