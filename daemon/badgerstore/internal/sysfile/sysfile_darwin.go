package sysfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Fdatasync makes f's data durable. On macOS that takes F_FULLFSYNC: fsync
// there leaves the data in the drive's cache.
func Fdatasync(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
	return err
}

// Fallocate reports ENOSYS: macOS has no fallocate, and the caller writes
// the zeros, which allocate as well.
func Fallocate(*os.File, int64, int64) error { return unix.ENOSYS }
