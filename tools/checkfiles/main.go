// Command checkfiles fails (exit 1) when the git checkout it runs in tracks
// an executable binary (ELF, Mach-O, PE) or a file larger than 1 MiB outside
// a testdata directory, naming each; make lint runs it.
package main

import (
	"fmt"
	"os"

	"github.com/savepoint-dev/savepoint/internal/trackedfiles"
)

func main() {
	ps, err := trackedfiles.Check(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkfiles:", err)
		os.Exit(2)
	}
	for _, p := range ps {
		fmt.Fprintln(os.Stderr, "checkfiles:", p)
	}
	if len(ps) > 0 {
		fmt.Fprintln(os.Stderr, "checkfiles: remove these from git (git rm --cached) and ignore them in .gitignore")
		os.Exit(1)
	}
}
