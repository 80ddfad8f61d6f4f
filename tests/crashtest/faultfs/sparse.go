package faultfs

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copySparse copies the first size bytes of src to dst, reading only the
// data regions (SEEK_DATA, SEEK_HOLE), so that a sparse file's holes stay
// holes, and returns the bytes copied.
func copySparse(dst, src *os.File, size int64) (int64, error) {
	var copied int64
	fd := int(src.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return copied, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return copied, err
		}
		hole = min(hole, size)
		if data >= hole {
			break
		}
		n, err := io.Copy(io.NewOffsetWriter(dst, data), io.NewSectionReader(src, data, hole-data))
		copied += n
		if err != nil {
			return copied, err
		}
		off = hole
	}
	return copied, dst.Truncate(size)
}
