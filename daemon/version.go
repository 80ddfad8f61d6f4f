package daemon

import "runtime/debug"

// version is savepointd's version when set at link time, as `make build
// VERSION=v1.2.3` does with
// -ldflags "-X github.com/savepoint-dev/savepoint/daemon.version=v1.2.3".
var version string

// Version returns savepointd's version: the one set at link time, else the
// main module's version from the build info (a pseudo-version such as
// v0.0.0-20261203081759-09f947d1a2b3+dirty when built from a git checkout,
// "(devel)" when the build recorded none), else "unknown".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}
