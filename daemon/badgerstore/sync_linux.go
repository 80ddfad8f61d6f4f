package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data, and the metadata needed to read it, durable.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// fallocate allocates n bytes of f from off, so that writes there cannot
// fail for want of space; EOPNOTSUPP or ENOSYS say the filesystem cannot.
func fallocate(f *os.File, off, n int64) error { return unix.Fallocate(int(f.Fd()), 0, off, n) }
