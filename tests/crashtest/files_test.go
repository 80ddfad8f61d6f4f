package crashtest

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// filesWith returns the files in dir whose names end in ext, sorted.
func filesWith(t *testing.T, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// usedBytes returns the offset just past the last non-zero byte of path:
// Badger's logs are sparse files mapped at their full size, written from the
// start.
func usedBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var last, off int64
	for {
		n, err := f.Read(buf)
		j := n - 1
		for j >= 0 && buf[j] == 0 {
			j--
		}
		if j >= 0 {
			last = off + int64(j) + 1
		}
		off += int64(n)
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// flipByte inverts the bits of the byte at off.
func flipByte(t *testing.T, path string, off int64) (was byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	was = b[0]
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	return was
}

// readRange returns n bytes of path from off (fewer at the end of the file).
func readRange(t *testing.T, path string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b[:m]
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
