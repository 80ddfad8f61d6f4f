package logfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotate(t *testing.T) {
	tests := []struct {
		name     string
		existing string // the log file before Open
		max      int64
		writes   []string
		cur, old string // the files after
		noOld    bool
	}{
		{name: "under the limit", max: 16, writes: []string{"aaaa\n", "bbbb\n"}, cur: "aaaa\nbbbb\n", noOld: true},
		{name: "exactly the limit", max: 10, writes: []string{"aaaa\n", "bbbb\n"}, cur: "aaaa\nbbbb\n", noOld: true},
		{name: "over the limit", max: 10, writes: []string{"aaaa\n", "bbbb\n", "cccc\n"}, cur: "cccc\n", old: "aaaa\nbbbb\n"},
		{name: "only one previous file", max: 10, writes: []string{"aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n"}, cur: "eeee\n", old: "cccc\ndddd\n"},
		{name: "appends to an existing file", existing: "old\n", max: 10, writes: []string{"aaaa\n"}, cur: "old\naaaa\n", noOld: true},
		{name: "an existing file over the limit", existing: "0123456789ab\n", max: 10, writes: []string{"aaaa\n"}, cur: "aaaa\n", old: "0123456789ab\n"},
		{name: "a line longer than the limit", max: 10, writes: []string{"aaaa\n", "0123456789ab\n", "cccc\n"}, cur: "cccc\n", old: "0123456789ab\n"},
		{name: "no limit", max: 0, writes: []string{"aaaa\n", "bbbb\n", "cccc\n"}, cur: "aaaa\nbbbb\ncccc\n", noOld: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "savepointd.log")
			if tt.existing != "" {
				if err := os.WriteFile(path, []byte(tt.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Open(path, tt.max, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.writes {
				if n, err := l.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := read(t, path); got != tt.cur {
				t.Errorf("current file %q, want %q", got, tt.cur)
			}
			_, err = os.Stat(path + ".1")
			switch {
			case tt.noOld && !errors.Is(err, os.ErrNotExist):
				t.Errorf("%s.1 exists (%v), want none", path, err)
			case !tt.noOld:
				if got := read(t, path+".1"); got != tt.old {
					t.Errorf("previous file %q, want %q", got, tt.old)
				}
			}
			if _, err := os.Stat(path + ".2"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s.2: %v, want none", path, err)
			}
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("current file's mode: %v, %v; want 0600", st.Mode(), err)
			}
		})
	}
}

// TestOnOpen: onOpen is called with the file opened first and with each
// file a rotation opens, so that savepointd's stdout and stderr follow.
func TestOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "savepointd.log")
	var opened []string
	l, err := Open(path, 8, func(f *os.File) error {
		_, err := f.WriteString("opened\n") // as a write to the redirected stderr would
		opened = append(opened, f.Name())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, w := range []string{"x\n", "yyyyyyy\n"} {
		if _, err := l.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if len(opened) != 2 {
		t.Fatalf("onOpen called %d times, want 2 (open, one rotation)", len(opened))
	}
	if got, want := read(t, path+".1"), "opened\nx\n"; got != want {
		t.Errorf("previous file %q, want %q", got, want)
	}
	if got, want := read(t, path), "opened\nyyyyyyy\n"; got != want {
		t.Errorf("current file %q, want %q", got, want)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, 10, nil); err == nil || !strings.Contains(err.Error(), "log file") {
		t.Errorf("Open(a directory) = %v, want a log file error", err)
	}
	if _, err := Open(filepath.Join(dir, "missing", "x.log"), 10, nil); err == nil {
		t.Error("Open in a missing directory: no error")
	}
	boom := errors.New("boom")
	if _, err := Open(filepath.Join(dir, "x.log"), 10, func(*os.File) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Open with a failing onOpen = %v, want boom", err)
	}
	l, err := Open(filepath.Join(dir, "y.log"), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Write([]byte("late\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close = %v, want os.ErrClosed", err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
