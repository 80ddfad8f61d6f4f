// Package sysfile holds the file system calls the store makes that differ
// between Linux and macOS: a data sync and an allocation.
package sysfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Fdatasync makes f's data, and the metadata needed to read it, durable.
func Fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// Fallocate allocates n bytes of f from off, so that writes there cannot
// fail for want of space; EOPNOTSUPP or ENOSYS say the filesystem cannot.
func Fallocate(f *os.File, off, n int64) error { return unix.Fallocate(int(f.Fd()), 0, off, n) }
