//go:build !unix

package client

import (
	"io/fs"
	"syscall"
)

func detached() *syscall.SysProcAttr  { return nil }
func ownerOf(fs.FileInfo) (int, bool) { return 0, false }
