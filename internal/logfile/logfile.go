// Package logfile is savepointd's --log-file: a log file that is rotated
// at a size, keeping the current file and the one before it (PATH.1), so
// that a daemon started on demand and left running never fills its disk.
package logfile

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// DefaultMaxBytes is the size at which a log file is rotated when the
// caller sets none: 4 MiB, so that the two files kept take at most 8 MiB.
const DefaultMaxBytes = 4 << 20

// File is an io.Writer appending to a log file at path, safe for
// concurrent use. A write that would take the file over MaxBytes first
// renames it to path.1 (replacing the previous one) and starts a new file,
// so the two files hold at most about 2*MaxBytes; a single write larger
// than MaxBytes still goes whole into a file of its own.
type File struct {
	path   string
	max    int64
	onOpen func(*os.File) error

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (creating it with mode 0600) the log file at path for
// appending, rotated at maxBytes (0 or less: never rotated). onOpen, when
// not nil, is called with each file opened, this one and each after a
// rotation (savepointd makes it its stdout and stderr). The caller closes
// the File.
func Open(path string, maxBytes int64, onOpen func(*os.File) error) (*File, error) {
	l := &File{path: path, max: maxBytes, onOpen: onOpen}
	f, size, err := l.open()
	if err != nil {
		return nil, err
	}
	l.f, l.size = f, size
	return l, nil
}

func (l *File) open() (*os.File, int64, error) {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("log file: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("log file: %s is not a regular file", l.path)
	}
	if err == nil && l.onOpen != nil {
		err = l.onOpen(f)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Write appends p to the log file, rotating it first when p would take it
// over its size. A rotation that fails leaves the current file in use.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	if l.max > 0 && l.size > 0 && l.size+int64(len(p)) > l.max {
		_ = l.rotate() // keep logging to the file there is rather than lose the line
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate renames the log file to path.1 and opens a new one at path.
func (l *File) rotate() error {
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	f, size, err := l.open()
	if err != nil {
		return err
	}
	old := l.f
	l.f, l.size = f, size
	return old.Close()
}

// Close closes the log file; later writes fail with os.ErrClosed.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("log file: already closed")
	}
	err := l.f.Close()
	l.f = nil
	return err
}
