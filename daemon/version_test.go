package daemon

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		t.Fatalf("no build info in the test binary: %v", bi)
	}
	if got := Version(); got != bi.Main.Version {
		t.Errorf("Version() = %q without a link-time version, want the build info's %q", got, bi.Main.Version)
	}
	version = "v9.8.7"
	t.Cleanup(func() { version = "" })
	if got := Version(); got != "v9.8.7" {
		t.Errorf("Version() = %q with the link-time version set, want v9.8.7", got)
	}
}
