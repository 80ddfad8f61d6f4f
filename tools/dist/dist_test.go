package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// fakePureWheel writes a small pure-Python wheel such as setuptools writes,
// with its entries in an order dist must not depend on.
func fakePureWheel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "savepoint-0.1.0-py3-none-any.whl")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range [][2]string{
		{"savepoint/__init__.py", "x = 1\n"},
		{"savepoint-0.1.0.dist-info/METADATA", "Metadata-Version: 2.4\nName: savepoint\nVersion: 0.1.0\n"},
		{"savepoint-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"savepoint/address.py", "y = 2\n"},
		{"savepoint-0.1.0.dist-info/RECORD", "stale\n"},
	} {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReproducible builds linux/amd64 twice, into two directories, and
// packs each into its own output: the archives and wheels must be the same
// bytes, and the binaries static executables for the platform. Without
// -full it builds testdata/small (seconds); `make test-dist` and
// `make test-dist-full` run it with -full on savepointd and savepoint, whose
// compile `make dist` has just cached.
func TestReproducible(t *testing.T) {
	p := Platform{"linux", "amd64"}
	pure := fakePureWheel(t)
	var outs [2]string
	for i := range outs {
		bin, out := t.TempDir(), t.TempDir()
		binaries(t, p, bin)
		for _, c := range Commands {
			if err := CheckBinary(filepath.Join(bin, c), p); err != nil {
				t.Fatal(err)
			}
		}
		cfg := Config{Version: "v9.9.9-test", Out: out, Epoch: 1700000000, PureWheel: pure, Root: root}
		if _, err := Tarball(cfg, p, bin); err != nil {
			t.Fatal(err)
		}
		whl, err := Wheel(cfg, p, bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PureWheel(cfg); err != nil {
			t.Fatal(err)
		}
		checkRecord(t, whl)
		if err := WriteSums(out); err != nil {
			t.Fatal(err)
		}
		outs[i] = out
	}
	want := []string{
		"SHA256SUMS",
		"savepoint-0.1.0-py3-none-any.whl",
		"savepoint-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl",
		"savepoint_v9.9.9-test_linux_amd64.tar.gz",
	}
	for _, name := range want {
		a, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(outs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs (%d and %d bytes)", name, len(a), len(b))
		}
	}
	entries, _ := os.ReadDir(outs[0])
	if len(entries) != len(want) {
		t.Errorf("output holds %d files, want %v", len(entries), want)
	}
}

// checkRecord checks that a wheel's RECORD lists every other entry with its
// sha256 and size, that the binaries are executable scripts, and WHEEL is
// not purelib.
func checkRecord(t *testing.T, whl string) {
	t.Helper()
	zr, err := zip.OpenReader(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got := map[string]string{}
	var record, wheel string
	for _, f := range zr.File {
		data, err := readZip(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		got[f.Name] = fmt.Sprintf("%s,sha256=%s,%d", f.Name, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
		switch {
		case strings.HasSuffix(f.Name, ".dist-info/RECORD"):
			record = string(data)
			got[f.Name] = f.Name + ",,"
		case strings.HasSuffix(f.Name, ".dist-info/WHEEL"):
			wheel = string(data)
		case strings.Contains(f.Name, ".data/scripts/"):
			if f.Mode().Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0755", f.Name, f.Mode())
			}
		}
	}
	lines := strings.Split(strings.TrimSuffix(record, "\n"), "\n")
	if len(lines) != len(got) {
		t.Errorf("RECORD has %d lines for %d entries", len(lines), len(got))
	}
	for _, l := range lines {
		name, _, _ := strings.Cut(l, ",")
		if got[name] != l {
			t.Errorf("RECORD line %q, want %q", l, got[name])
		}
	}
	for _, s := range []string{"savepoint-0.1.0.data/scripts/savepointd", "savepoint-0.1.0.data/scripts/savepoint"} {
		if _, ok := got[s]; !ok {
			t.Errorf("wheel has no %s", s)
		}
	}
	if !strings.Contains(wheel, "Root-Is-Purelib: false\n") || !strings.Contains(wheel, "Tag: py3-none-manylinux_2_17_x86_64\n") {
		t.Errorf("WHEEL:\n%s", wheel)
	}
}

// full makes TestReproducible and TestDarwin build the release's commands
// rather than testdata/small (make test-dist, make test-dist-full).
var full = flag.Bool("full", false, "TestReproducible, TestDarwin: build savepointd and savepoint (minutes from a cold cache), not testdata/small")

// binaries builds for p into bin, under the flags of a release: with -full
// Build's commands; otherwise testdata/small, written under each command's
// name, so that everything past the compiler (the ELF and Mach-O checks,
// the archives, the wheel's tag) runs on a real executable of the
// toolchain.
func binaries(t *testing.T, p Platform, bin string) {
	t.Helper()
	if *full {
		if err := Build(root, p, "v9.9.9-test", bin); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, c := range Commands {
		if err := build(root, p, "v9.9.9-test", filepath.Join(bin, c), "./tools/dist/testdata/small"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDarwin builds both darwin platforms, which cannot run here, and checks
// that each binary is a Mach-O executable of its CPU (and not of the
// other's), and that the wheel's tag names the macOS it needs. Without
// -full it builds testdata/small (seconds); `make test-dist-full` builds
// savepointd and savepoint (minutes), as `make dist` does.
func TestDarwin(t *testing.T) {
	for _, tc := range []struct {
		p, other Platform
		tag      string
	}{
		{Platform{"darwin", "amd64"}, Platform{"darwin", "arm64"}, "_x86_64"},
		{Platform{"darwin", "arm64"}, Platform{"darwin", "amd64"}, "_arm64"},
	} {
		t.Run(tc.p.Arch, func(t *testing.T) {
			bin := t.TempDir()
			binaries(t, tc.p, bin)
			for _, c := range Commands {
				path := filepath.Join(bin, c)
				if err := CheckBinary(path, tc.p); err != nil {
					t.Error(err)
				}
				if err := CheckBinary(path, tc.other); err == nil {
					t.Errorf("%s passes as %s", path, tc.other)
				}
				if err := CheckBinary(path, Platform{"linux", tc.p.Arch}); err == nil {
					t.Errorf("%s passes as an ELF", path)
				}
			}
			tags, err := WheelTags(tc.p, bin)
			if err != nil {
				t.Fatal(err)
			}
			major, _, err := MachOMinOS(filepath.Join(bin, "savepointd"))
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("macosx_%d_0%s", major, tc.tag); len(tags) != 1 || tags[0] != want || major < 10 {
				t.Errorf("tags %v, want [%s]", tags, want)
			}
		})
	}
}
