// Package trackedfiles finds the files a git checkout should not track:
// executable binaries, which belong to the build and not to the source, and
// files larger than MaxBytes outside a testdata directory.
package trackedfiles

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// MaxBytes is the largest file Check accepts outside a testdata directory.
const MaxBytes = 1 << 20

// Kind is what a file's first bytes say it is.
type Kind int

const (
	// Other is any file that is not an executable binary.
	Other Kind = iota
	// ELF is a Linux (or other Unix) executable, object or shared library.
	ELF
	// MachO is a macOS executable, thin or universal.
	MachO
	// PE is a Windows executable or DLL.
	PE
)

func (k Kind) String() string {
	switch k {
	case ELF:
		return "an ELF binary"
	case MachO:
		return "a Mach-O binary"
	case PE:
		return "a PE (Windows) binary"
	}
	return "not a binary"
}

// machO holds the Mach-O magic numbers: 32- and 64-bit in either byte order,
// and the universal (fat) header.
var machO = [][]byte{
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
}

// Classify reads the head of r and reports which kind of executable it is,
// Other when none. A PE file is recognized by its "MZ" stub and the "PE\0\0"
// signature the stub points to, so a text file that starts with "MZ" is
// not one.
func Classify(r io.ReaderAt) (Kind, error) {
	head := make([]byte, 64)
	n, err := r.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return Other, err
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return ELF, nil
	case len(head) >= 4 && slices.ContainsFunc(machO, func(m []byte) bool { return bytes.Equal(head[:4], m) }):
		return MachO, nil
	case len(head) == 64 && bytes.HasPrefix(head, []byte("MZ")):
		off := int64(binary.LittleEndian.Uint32(head[0x3c:]))
		sig := make([]byte, 4)
		if _, err := r.ReadAt(sig, off); err == nil && string(sig) == "PE\x00\x00" {
			return PE, nil
		}
	}
	return Other, nil
}

// Problem is one tracked file that should not be tracked.
type Problem struct {
	Path   string // relative to the checkout, with forward slashes
	Reason string
}

func (p Problem) String() string { return p.Path + ": " + p.Reason }

// InTestdata reports whether path (slash-separated, relative) lies under a
// directory named testdata, where fixtures of any size and kind may live.
func InTestdata(path string) bool {
	return slices.Contains(strings.Split(path, "/")[:strings.Count(path, "/")], "testdata")
}

// CheckFile returns the problems of one file of the given size, whose
// contents r holds; path decides whether the testdata exemption applies.
func CheckFile(path string, size int64, r io.ReaderAt) ([]Problem, error) {
	if InTestdata(path) {
		return nil, nil
	}
	var ps []Problem
	if size > MaxBytes {
		ps = append(ps, Problem{path, fmt.Sprintf("%d bytes, more than %d outside testdata/", size, MaxBytes)})
	}
	k, err := Classify(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if k != Other {
		ps = append(ps, Problem{path, k.String() + ": built files stay out of git"})
	}
	return ps, nil
}

// Check lists the files git tracks in the checkout at dir and returns the
// problems of each, in path order. Symbolic links and tracked files missing
// from the work tree (deleted, not yet committed) are skipped.
func Check(dir string) ([]Problem, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "-z")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w", dir, err)
	}
	var ps []Problem
	for _, path := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if path == "" {
			continue
		}
		p, err := checkPath(dir, path)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p...)
	}
	return ps, nil
}

func checkPath(dir, path string) ([]Problem, error) {
	full := filepath.Join(dir, filepath.FromSlash(path))
	fi, err := os.Lstat(full)
	if os.IsNotExist(err) || err == nil && !fi.Mode().IsRegular() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return CheckFile(path, fi.Size(), f)
}
