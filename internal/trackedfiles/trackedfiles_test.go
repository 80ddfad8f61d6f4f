package trackedfiles

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// header returns n bytes that start with prefix and hold the little-endian
// uint32 v at off (when off >= 0), zero elsewhere.
func header(n int, prefix string, off int, v uint32) []byte {
	b := make([]byte, n)
	copy(b, prefix)
	if off >= 0 {
		binary.LittleEndian.PutUint32(b[off:], v)
	}
	return b
}

// The fixtures are built here rather than kept under testdata: the
// executable headers are what this package refuses to see tracked.
var (
	elfHeader = header(64, "\x7fELF\x02\x01\x01", -1, 0)
	fixtures  = map[string][]byte{
		"elf":                  elfHeader,
		"macho64":              header(32, "\xcf\xfa\xed\xfe", -1, 0),
		"macho32be":            header(32, "\xfe\xed\xfa\xce", -1, 0),
		"universal":            header(32, "\xca\xfe\xba\xbe", -1, 0),
		"pe.exe":               append(header(64, "MZ", 0x3c, 0x40), "PE\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"...),
		"mz-text.txt":          []byte("MZ is how this note starts; it is plain text and long enough to have a 0x3c field.\n"),
		"mz-pointing-past-end": header(64, "MZ", 0x3c, 0x1000),
		"text.txt":             []byte("Q3 sales notes, West region.\n"),
		"short":                []byte("\x7fE"),
		"empty":                {},
	}
)

// TestClassify checks the kind of each fixture.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Kind
	}{
		{"elf", ELF},
		{"macho64", MachO},
		{"macho32be", MachO},
		{"universal", MachO},
		{"pe.exe", PE},
		{"mz-text.txt", Other},
		{"mz-pointing-past-end", Other},
		{"text.txt", Other},
		{"short", Other},
		{"empty", Other},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Classify(bytes.NewReader(fixtures[tc.file]))
			if err != nil || got != tc.want {
				t.Errorf("Classify = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestCheckFile checks which paths, sizes and contents are problems.
func TestCheckFile(t *testing.T) {
	elf := elfHeader
	text := []byte("hello\n")
	for _, tc := range []struct {
		name     string
		path     string
		size     int64
		data     []byte
		problems int
	}{
		{"small text", "docs/a.md", 6, text, 0},
		{"exactly the limit", "docs/a.md", MaxBytes, text, 0},
		{"one byte over", "docs/a.md", MaxBytes + 1, text, 1},
		{"big in testdata", "daemon/testdata/big.db", 50 << 20, text, 0},
		{"big in nested testdata", "a/testdata/b/big", 50 << 20, text, 0},
		{"file named testdata is not a directory", "a/testdata", 50 << 20, text, 1},
		{"binary", "cmd/savepointd/savepointd", 64, elf, 1},
		{"big binary", "savepointd", 33 << 20, elf, 2},
		{"binary fixture in testdata", "internal/x/testdata/elf", 64, elf, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := CheckFile(tc.path, tc.size, bytes.NewReader(tc.data))
			if err != nil || len(ps) != tc.problems {
				t.Errorf("CheckFile(%q, %d) = %v, %v; want %d problems", tc.path, tc.size, ps, err, tc.problems)
			}
		})
	}
}

// TestCheck runs Check over a git repository made here: it names the
// tracked binary and the tracked large file, and neither the untracked
// binary nor the large fixture under testdata.
func TestCheck(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	elf := elfHeader
	write := func(name string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("README.md", []byte("# x\n"))
	write("cmd/d/d", elf)
	write("big.json", make([]byte, MaxBytes+1))
	write("pkg/testdata/big.db", make([]byte, MaxBytes+1))
	write("gone.bin", elf)
	git("add", ".")
	write("untracked", elf)
	if err := os.Remove(filepath.Join(dir, "gone.bin")); err != nil {
		t.Fatal(err)
	}
	ps, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range ps {
		paths = append(paths, p.Path)
	}
	if want := []string{"big.json", "cmd/d/d"}; !slices.Equal(paths, want) {
		t.Errorf("Check found %v, want %v", ps, want)
	}
}
