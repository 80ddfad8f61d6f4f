package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// deviceWrites counts what the block device holding dir has written: the
// sectors written in /sys/dev/block/MAJOR:MINOR/stat, times 512, read after
// a syncfs of dir's filesystem, so that what its writers left in the page
// cache is written, and counted, first. Every writer to that device is
// counted, this process and the machine's other processes too.
type deviceWrites struct{ dir string }

func (d deviceWrites) WriteBytes() (int64, error) {
	f, err := os.Open(d.dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return 0, fmt.Errorf("syncfs %s: %w", d.dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("%s is not on a block device whose writes can be counted: %w", d.dir, err)
	}
	return parseSectorsWritten(b)
}

// parseSectorsWritten returns the bytes a block device's stat file says it
// has written: its seventh field, in 512-byte sectors whatever the device's
// own sector size (Documentation/block/stat.rst).
func parseSectorsWritten(b []byte) (int64, error) {
	f := strings.Fields(string(b))
	if len(f) < 7 {
		return 0, fmt.Errorf("block device stat %q has %d fields, want at least 7", b, len(f))
	}
	n, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("block device stat: sectors written %q: %w", f[6], err)
	}
	return n * 512, nil
}
