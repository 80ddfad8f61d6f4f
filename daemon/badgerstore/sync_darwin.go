package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable. On macOS that takes F_FULLFSYNC: fsync
// there leaves the data in the drive's cache.
func fdatasync(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
	return err
}

// fallocate reports ENOSYS: macOS has no fallocate, and fillZeros writes
// the zeros, which allocate as well.
func fallocate(*os.File, int64, int64) error { return unix.ENOSYS }
