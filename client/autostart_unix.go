//go:build unix

package client

import (
	"io/fs"
	"syscall"
)

// detached puts a daemon started on demand in a session and process group
// of its own, so that the caller's terminal and signals do not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// ownerOf returns the uid owning fi's file.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
