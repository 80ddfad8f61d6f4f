package version

import (
	"runtime/debug"
	"testing"
)

func TestString(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		t.Fatalf("no build info in the test binary: %v", bi)
	}
	if got := String(); got != bi.Main.Version {
		t.Errorf("String() = %q without a link-time version, want the build info's %q", got, bi.Main.Version)
	}
	version = "v9.8.7"
	t.Cleanup(func() { version = "" })
	if got := String(); got != "v9.8.7" {
		t.Errorf("String() = %q with the link-time version set, want v9.8.7", got)
	}
}
