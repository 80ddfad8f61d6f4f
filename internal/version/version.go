// Package version is the version every binary of the repository reports
// (savepointd, GetServerInfo, savepoint, the inspector): the one `make
// build` stamps at link time, else the one Go records in the build info.
package version

import "runtime/debug"

// version is set at link time, as `make build` does with
// -ldflags "-X github.com/savepoint-dev/savepoint/internal/version.version=v1.2.3".
var version string

// String returns the version: the one set at link time, else the main
// module's version from the build info ("(devel)" when the build recorded
// none), else "unknown".
func String() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// Commit returns the commit the binary was built from, as Go recorded it
// in the build info (vcs.revision, with "-dirty" when vcs.modified), or ""
// when the build recorded none (GOFLAGS=-buildvcs=false, or no checkout).
func Commit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return commitOf(bi.Settings)
}

func commitOf(settings []debug.BuildSetting) string {
	var rev, dirty string
	for _, s := range settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
