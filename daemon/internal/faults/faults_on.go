//go:build savepoint_faults

package faults

import (
	"fmt"
	"slices"
	"strings"
)

// names lists the faults this test-only build injects, comma-separated, set
// at link time (tests/daemontest.BuildFaults does it):
//
//	go build -tags savepoint_faults \
//	  -ldflags '-X github.com/savepoint-dev/savepoint/daemon/internal/faults.names=nosync' ./cmd/savepointd
//
// Empty injects none; faults.go says what each does.
var names string

// Known lists the names a build may inject.
var Known = []string{"broken", "nosync", "nodirsync", "smallvlog"}

var (
	AckBeforeSync = has("broken")
	SkipSync      = has("nosync")
	SkipDirSync   = has("nodirsync")
	SmallValueLog = has("smallvlog")
)

func init() {
	for n := range strings.SplitSeq(names, ",") {
		if n != "" && !slices.Contains(Known, n) {
			panic(fmt.Sprintf("faults: unknown fault %q in this savepoint_faults build; known: %s", n, strings.Join(Known, ", ")))
		}
	}
}

func has(name string) bool { return slices.Contains(strings.Split(names, ","), name) }
