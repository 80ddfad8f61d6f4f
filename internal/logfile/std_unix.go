//go:build unix

package logfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Std makes f the process's stdout and stderr (file descriptors 1 and 2),
// so that what is written there without the logger (a Go runtime crash's
// trace) lands in the current log file too. It is an onOpen for Open.
func Std(f *os.File) error {
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			return err
		}
	}
	return nil
}
