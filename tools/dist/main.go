// Command dist builds Savepoint's release artifacts (`make dist`): for each
// platform, savepointd and the savepoint CLI cross-compiled with CGO off,
// -trimpath and no build id; a tar.gz of them with LICENSE, the systemd units
// and a README; a platform wheel of the Python client carrying them; an npm
// package of them, packed with npm; the TypeScript client packed with the
// platform packages as optional dependencies; and SHA256SUMS. Every archive
// it writes itself has fixed mtimes, owners and ordering, so two runs on the
// same commit give the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var cfg Config
	var platforms string
	flag.StringVar(&cfg.Version, "version", "", "the version the binaries report and the archives are named by (required)")
	flag.StringVar(&cfg.Out, "out", "dist", "output `directory`")
	flag.StringVar(&platforms, "platforms", strings.Join(PlatformNames(), ","), "comma-separated GOOS/GOARCH list")
	flag.Int64Var(&cfg.Epoch, "epoch", 0, "the mtime of every archive entry, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	flag.StringVar(&cfg.PureWheel, "pywheel", "", "the pure-Python wheel of the client to make the platform wheels from (empty: no wheels)")
	flag.StringVar(&cfg.NPMClient, "npm-client", "", "the TypeScript client's `directory`, built, to pack with its optional dependencies (empty: no npm packages)")
	flag.Parse()
	ps, err := ParsePlatforms(platforms)
	if err == nil {
		cfg.Platforms = ps
		err = Run(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}
