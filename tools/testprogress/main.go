// Command testprogress reads `go test -json` on stdin and prints a line as
// each package starts and finishes, the output of every failed test, and
// every -interval the packages still running; it exits 1 when anything
// failed, so `make test` can pipe go test through it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/savepoint-dev/savepoint/internal/testprogress"
)

func main() {
	interval := flag.Duration("interval", time.Minute, "how often to name the packages still running (0: never)")
	flag.Parse()
	sum, err := testprogress.Run(os.Stdin, os.Stdout, *interval)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if !sum.OK() {
		os.Exit(1)
	}
}
