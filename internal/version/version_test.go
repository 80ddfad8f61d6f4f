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

func TestCommitOf(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, ""},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "1c39b26"}, {Key: "vcs.modified", Value: "false"}}, "1c39b26"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "1c39b26"}}, "1c39b26-dirty"},
	} {
		if got := commitOf(tc.settings); got != tc.want {
			t.Errorf("commitOf(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}
