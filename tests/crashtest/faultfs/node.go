package faultfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node whose creates, opens, truncations and syncs the
// durable image follows.
type node struct {
	fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
)

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.isCut {
		return nil, nil, 0, syscall.EIO
	}
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.fsys.newHandle(fh, true)
	if h != nil {
		h.name = name
	}
	return ch, h, fuseFlags, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.isCut {
		return nil, syscall.EIO
	}
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		if _, err := n.fsys.lookup(filepath.Join(n.backingPath(), name), true); err != nil {
			return nil, fs.ToErrno(err)
		}
	}
	return ch, errno
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.isCut {
		return nil, 0, syscall.EIO
	}
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.fsys.newHandle(fh, false)
	if h != nil {
		h.name = filepath.Base(n.backingPath())
	}
	return h, fuseFlags, errno
}

// newHandle wraps a loopback file handle, finding (or, for a file just
// created, registering) its inode.
func (f *FS) newHandle(fh fs.FileHandle, fresh bool) (*handle, syscall.Errno) {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	in, ok := f.inodes[st.Ino]
	if fresh || !ok {
		in = f.newInode(&st)
	}
	return &handle{lf: lf, fd: fd, in: in, fsys: f}, 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.backingPath())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{ds: ds, n: n}, 0, 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	size, resize := in.GetSize()
	if resize && n.fsys.isCut {
		return syscall.EIO
	}
	var ino *inode
	if h, ok := f.(*handle); ok {
		f, ino = h.lf, h.in
	}
	if errno := n.LoopbackNode.Setattr(ctx, f, in, out); errno != 0 {
		return errno
	}
	if resize {
		if ino == nil {
			var err error
			if ino, err = n.fsys.lookup(n.backingPath(), false); err != nil {
				return fs.ToErrno(err)
			}
		}
		ino.truncated(int64(size))
	}
	return 0
}

// Fsync syncs a file opened without a handle of this file system (the
// bridge calls the node first); with one, the handle's Fsync does it.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if d, ok := f.(*dirHandle); ok {
		return d.Fsyncdir(ctx, flags)
	}
	return syscall.ENOTSUP
}

// handle is an open file: its writes are remembered as dirty until a sync.
type handle struct {
	lf   *fs.LoopbackFile
	fd   int // lf's descriptor
	in   *inode
	fsys *FS
	name string // the file's base name when opened
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, dest, off)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fsys.mu.Lock()
	defer h.fsys.mu.Unlock()
	if h.fsys.isCut {
		return 0, syscall.EIO
	}
	n, errno := h.lf.Write(ctx, data, off)
	h.in.wrote(off, int64(n))
	return n, errno
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.fsys.mu.Lock()
	defer h.fsys.mu.Unlock()
	if errno := h.fsys.beginSync(false, h.name); errno != 0 {
		return errno
	}
	return h.fsys.endSync(h.fsys.syncFile(h.in, h.fd))
}

func (h *handle) Flush(ctx context.Context) syscall.Errno   { return h.lf.Flush(ctx) }
func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	h.fsys.mu.Lock()
	defer h.fsys.mu.Unlock()
	if h.fsys.isCut {
		return syscall.EIO
	}
	errno := h.lf.Allocate(ctx, off, size, mode)
	if errno == 0 && mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
		end := int64(off + size)
		if mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
			end = 1 << 62 // the data after off moved
		}
		h.in.wrote(int64(off), end-int64(off))
	}
	return errno
}

// dirHandle is an open directory; its fsync makes its entries durable.
type dirHandle struct {
	ds fs.DirStream
	n  *node
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.ds.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.ds.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.ds.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	f := d.n.fsys
	f.mu.Lock()
	defer f.mu.Unlock()
	p := d.n.backingPath()
	if errno := f.beginSync(true, filepath.Base(p)); errno != 0 {
		return errno
	}
	in, err := f.lookup(p, false)
	if err != nil {
		return f.endSync(fs.ToErrno(err))
	}
	return f.endSync(f.syncDir(in, p))
}
