// Package faultfs is a FUSE file system for power-loss tests. It passes
// every operation through to a backing directory, and keeps beside it a
// durable image: a file's data and size become durable only when an fsync,
// fdatasync or msync of that file returns, and a directory's entries
// (creates, renames, unlinks) only when an fsync of that directory returns.
// PowerCut makes every later operation fail with EIO and freezes the image;
// Restore then rebuilds the backing directory from it, so that what a
// program finds there after a restart is what a disk would hold after a
// power loss at that moment. The kernel's page cache of the mount cannot
// hide an unsynced write, because the mount is gone before Restore.
//
// The model is the strict one POSIX promises, as LazyFS's is: a file
// created and fsynced but whose directory was not fsynced is lost; data
// never fsynced is lost even in a file whose entry is durable.
package faultfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mount of the file system over a backing directory.
type FS struct {
	backing, mountpoint, shadow string
	server                      *fuse.Server

	mu      sync.Mutex
	inodes  map[uint64]*inode // the backing file system's st_ino -> its current inode
	root    *inode
	nextID  int
	isCut   bool
	cutAt   int // cut power at this fsync (1-based); 0 never
	cutPast int // cut power once this fsync (1-based) completes; 0 never
	point   *SyncPoint
	left    int  // syncs of point to go before the cut
	after   bool // the sync under way is point's: cut once it completes
	stats   Stats
	synced  []string // the names of the syncs counted in stats, in order
	cutOnce sync.Once
	cut     chan struct{}
}

// Stats counts what the file system made durable.
type Stats struct {
	FileSyncs, DirSyncs int   // fsyncs of files (msync included) and of directories
	SyncedBytes         int64 // bytes copied into the durable image
}

// inode is one file or directory as the durable image knows it. A new
// file gets a new inode even when the backing file system reuses an
// st_ino, so an unlinked file's durable contents are never confused with
// its successor's.
type inode struct {
	id      int
	dir     bool
	mode    uint32
	dirty   [][2]int64        // file: byte ranges written since the last sync
	minSize int64             // file: the smallest size since the last sync, -1 when not truncated
	synced  bool              // file: shadow/<id> holds its durable contents
	entries map[string]*inode // directory: the durable entries
}

// Mount mounts the file system on mountpoint over backing, with everything
// backing holds now taken as durable. Files in shadow (a directory of its
// own on the same file system as backing) hold the durable contents.
func Mount(backing, mountpoint, shadow string) (*FS, error) {
	f := &FS{backing: backing, mountpoint: mountpoint, shadow: shadow, inodes: map[uint64]*inode{}, cut: make(chan struct{})}
	if err := os.MkdirAll(shadow, 0o700); err != nil {
		return nil, err
	}
	root, err := f.scan(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: reading %s: %w", backing, err)
	}
	f.root = root
	lroot := &fs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	lroot.Dev = uint64(st.Dev)
	lroot.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fsys: f}
	}
	rootNode := &node{LoopbackNode: fs.LoopbackNode{RootData: lroot}, fsys: f}
	lroot.RootNode = rootNode
	timeout := time.Second
	server, err := fs.Mount(mountpoint, rootNode, &fs.Options{
		EntryTimeout: &timeout, AttrTimeout: &timeout,
		MountOptions: fuse.MountOptions{FsName: "faultfs", Name: "faultfs", DirectMount: true},
	})
	if err != nil {
		return nil, fmt.Errorf("faultfs: mounting on %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// Available says why FUSE cannot be mounted here, or returns nil: it needs
// /dev/fuse, and either root (mount(2)) or fusermount3 (fuse3).
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse (%v), so the power-loss tests cannot mount their file system", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return fmt.Errorf("not root and no fusermount3 (install fuse3), so the power-loss tests cannot mount their file system")
		}
	}
	return nil
}

// CutAtSync makes the n-th fsync from now (a file's or a directory's) cut
// the power instead of completing: it fails with EIO and makes nothing
// durable, as a power loss during that sync would.
func (f *FS) CutAtSync(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutAt = f.stats.FileSyncs + f.stats.DirSyncs + n
}

// CutAfterSync makes the n-th fsync from now (a file's or a directory's)
// complete, making its file or entries durable, and then cut the power:
// between that sync and whatever the program does next.
func (f *FS) CutAfterSync(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutPast = f.stats.FileSyncs + f.stats.DirSyncs + n
}

// Syncs returns the base names of the files and directories synced since
// Mount, in order, a directory's with a trailing "/"; a sync the power cut
// is among them.
func (f *FS) Syncs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.synced...)
}

// SyncPoint names a place to cut the power by the file a sync is of: a
// log's segment, Badger's value log, a mark being written.
type SyncPoint struct {
	Name string
	// Match is given the base name of the file synced (of the directory,
	// for a directory's sync).
	Match func(name string) bool
	// After cuts the power right after the sync has made the file durable,
	// instead of failing it: between that sync and whatever the program
	// does next.
	After bool
}

// CutAtSyncOf cuts the power at the n-th sync from now that p matches.
func (f *FS) CutAtSyncOf(p SyncPoint, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.point, f.left = &p, n
}

// PowerCut freezes the durable image: from now on every write and sync
// fails with EIO.
func (f *FS) PowerCut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutLocked()
}

func (f *FS) cutLocked() {
	f.isCut = true
	f.cutOnce.Do(func() { close(f.cut) })
}

// Cut is closed once the power is cut, by PowerCut or by CutAtSync.
func (f *FS) Cut() <-chan struct{} { return f.cut }

// Stats returns what the file system made durable since Mount.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Unmount unmounts the file system. Every process using it must be gone.
func (f *FS) Unmount() error {
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("faultfs: unmounting %s: %w", f.mountpoint, err)
}

// Restore cuts the power if it is not yet cut, and replaces the backing
// directory's contents with the durable image. The file system must be
// unmounted.
func (f *FS) Restore() error {
	f.PowerCut()
	f.mu.Lock()
	defer f.mu.Unlock()
	ents, err := os.ReadDir(f.backing)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(f.backing, e.Name())); err != nil {
			return err
		}
	}
	placed := map[*inode]string{}
	if err := f.restoreDir(f.root, f.backing, placed); err != nil {
		return fmt.Errorf("faultfs: restoring %s: %w", f.backing, err)
	}
	return os.RemoveAll(f.shadow)
}

func (f *FS) restoreDir(d *inode, path string, placed map[*inode]string) error {
	names := make([]string, 0, len(d.entries))
	for name := range d.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		in, p := d.entries[name], filepath.Join(path, name)
		if prev, ok := placed[in]; ok && !in.dir {
			if err := os.Link(prev, p); err != nil {
				return err
			}
			continue
		}
		placed[in] = p
		if in.dir {
			if err := os.Mkdir(p, os.FileMode(in.mode&0o7777)); err != nil {
				return err
			}
			if err := f.restoreDir(in, p, placed); err != nil {
				return err
			}
			continue
		}
		if in.synced {
			if err := os.Rename(f.shadowPath(in), p); err != nil {
				return err
			}
			if err := os.Chmod(p, os.FileMode(in.mode&0o7777)); err != nil {
				return err
			}
			continue
		}
		// An entry whose file was never synced: the file is there, empty.
		if err := os.WriteFile(p, nil, os.FileMode(in.mode&0o7777)); err != nil {
			return err
		}
	}
	return nil
}

func (f *FS) shadowPath(in *inode) string { return filepath.Join(f.shadow, fmt.Sprint(in.id)) }

// scan registers everything under path as durable.
func (f *FS) scan(path string) (*inode, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, err
	}
	in := f.newInode(&st)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			child, err := f.scan(filepath.Join(path, e.Name()))
			if err != nil {
				return nil, err
			}
			in.entries[e.Name()] = child
		}
	case syscall.S_IFREG:
		src, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		dst, err := os.Create(f.shadowPath(in))
		if err != nil {
			return nil, err
		}
		defer dst.Close()
		if _, err := copySparse(dst, src, st.Size); err != nil {
			return nil, err
		}
		in.synced = true
	default:
		return nil, fmt.Errorf("%s: only files and directories are supported", path)
	}
	return in, nil
}

// newInode registers a new inode for the backing file st describes.
func (f *FS) newInode(st *syscall.Stat_t) *inode {
	f.nextID++
	in := &inode{id: f.nextID, mode: st.Mode, minSize: -1, dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR}
	if in.dir {
		in.entries = map[string]*inode{}
	}
	f.inodes[st.Ino] = in
	return in
}

// lookup returns the inode of the backing file at path, registering it
// when it is new (fresh says it was just created).
func (f *FS) lookup(path string, fresh bool) (*inode, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, err
	}
	if in, ok := f.inodes[st.Ino]; ok && !fresh {
		return in, nil
	}
	return f.newInode(&st), nil
}

// syncFile makes the data of in, open as fd in the backing file system,
// durable.
func (f *FS) syncFile(in *inode, fd int) syscall.Errno {
	src, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return fs.ToErrno(err)
	}
	defer src.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(src.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	dst, err := os.OpenFile(f.shadowPath(in), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer dst.Close()
	if in.minSize >= 0 {
		if err := dst.Truncate(in.minSize); err != nil {
			return fs.ToErrno(err)
		}
	}
	buf := make([]byte, 1<<20)
	for _, r := range in.dirty {
		for off := r[0]; off < r[1] && off < st.Size; {
			n := min(int64(len(buf)), r[1]-off, st.Size-off)
			got, err := src.ReadAt(buf[:n], off)
			if got > 0 {
				if _, err := dst.WriteAt(buf[:got], off); err != nil {
					return fs.ToErrno(err)
				}
				f.stats.SyncedBytes += int64(got)
			}
			if err != nil || got == 0 {
				break // the file shrank under us; its size is what counts
			}
			off += int64(got)
		}
	}
	if err := dst.Truncate(st.Size); err != nil {
		return fs.ToErrno(err)
	}
	in.dirty, in.minSize, in.synced = nil, -1, true
	return 0
}

// syncDir makes the entries of the backing directory at path durable.
func (f *FS) syncDir(in *inode, path string) syscall.Errno {
	ents, err := os.ReadDir(path)
	if err != nil {
		return fs.ToErrno(err)
	}
	durable := make(map[string]*inode, len(ents))
	for _, e := range ents {
		child, err := f.lookup(filepath.Join(path, e.Name()), false)
		if errors.Is(err, os.ErrNotExist) {
			continue // unlinked meanwhile
		}
		if err != nil {
			return fs.ToErrno(err)
		}
		durable[e.Name()] = child
	}
	in.entries = durable
	return 0
}

// beginSync counts one sync of the file or directory name and says
// whether it may go on (0) or the power is cut; when it may go on and is
// the SyncPoint's with After, or CutAfterSync's, endSync cuts the power.
func (f *FS) beginSync(dir bool, name string) syscall.Errno {
	if f.isCut {
		return syscall.EIO
	}
	if f.point != nil && f.point.Match(name) {
		if f.left--; f.left == 0 {
			if !f.point.After {
				f.cutLocked()
				return syscall.EIO
			}
			f.after = true
		}
	}
	if dir {
		f.stats.DirSyncs++
		f.synced = append(f.synced, name+"/")
	} else {
		f.stats.FileSyncs++
		f.synced = append(f.synced, name)
	}
	n := f.stats.FileSyncs + f.stats.DirSyncs
	if f.cutAt > 0 && n >= f.cutAt {
		f.cutLocked()
		return syscall.EIO
	}
	if f.cutPast > 0 && n >= f.cutPast {
		f.after = true
	}
	return 0
}

// endSync ends a sync that beginSync let go on, cutting the power when it
// was the SyncPoint's with After.
func (f *FS) endSync(errno syscall.Errno) syscall.Errno {
	if f.after {
		f.after = false
		f.cutLocked()
	}
	return errno
}

func (in *inode) wrote(off, n int64) {
	if n <= 0 {
		return
	}
	// Merge with the last range when adjacent or overlapping (appends).
	if k := len(in.dirty); k > 0 && off <= in.dirty[k-1][1] && off+n >= in.dirty[k-1][0] {
		in.dirty[k-1][0] = min(in.dirty[k-1][0], off)
		in.dirty[k-1][1] = max(in.dirty[k-1][1], off+n)
		return
	}
	in.dirty = append(in.dirty, [2]int64{off, off + n})
}

func (in *inode) truncated(size int64) {
	if in.minSize < 0 || size < in.minSize {
		in.minSize = size
	}
}
