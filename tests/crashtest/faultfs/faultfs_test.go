package faultfs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mount mounts a file system over a fresh backing directory, or skips the
// test, saying why, where FUSE is not available.
func mount(t *testing.T) (fsys *FS, backing, mnt string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "backing"), 0o755))
	return mountOn(t, dir)
}

// mountOn mounts a file system over dir/backing on dir/mnt.
func mountOn(t *testing.T, dir string) (fsys *FS, backing, mnt string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	backing, mnt = filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	fsys, err := Mount(backing, mnt, filepath.Join(dir, "shadow"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Unmount() })
	return fsys, backing, mnt
}

// mapEnv names, in a child process of the test binary, the file
// mapChild writes through a shared mapping.
const mapEnv = "FAULTFS_MAP_CHILD"

func TestMain(m *testing.M) {
	if p := os.Getenv(mapEnv); p != "" {
		if err := mapChild(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeThroughMapping has a child process write to the file p, of at least
// 8 KiB on a mounted FS, through a shared mapping: "through the mapping" at
// 4096, msynced, then "after the msync" at 100, never synced. A child,
// because a page fault on a FUSE file served by the faulting process can
// deadlock it: the faulting thread cannot stop for the Go runtime while
// the server goroutines that would answer the fault wait on the runtime.
func writeThroughMapping(t *testing.T, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mapEnv+"="+p)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing through a mapping in a child process: %v\n%s", err, out)
	}
}

// mapChild is writeThroughMapping's child.
func mapChild(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(mem[4096:], "through the mapping")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		return err
	}
	copy(mem[100:], "after the msync") // never synced
	return unix.Munmap(mem)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func syncPath(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	must(t, f.Sync())
}

// cut cuts the power, unmounts and restores the durable image.
func cut(t *testing.T, fsys *FS) {
	t.Helper()
	fsys.PowerCut()
	must(t, fsys.Unmount())
	must(t, fsys.Restore())
}

func read(t *testing.T, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "", false
	}
	must(t, err)
	return string(b), true
}

// TestPowerCutKeepsOnlyWhatWasSynced checks the durability model: data
// without an fsync is lost, a file without its directory's fsync is lost,
// an unlink or rename without the directory's fsync is undone, and a
// write through a shared mapping is durable after msync.
func TestPowerCutKeepsOnlyWhatWasSynced(t *testing.T) {
	fsys, backing, mnt := mount(t)
	must(t, os.WriteFile(filepath.Join(mnt, "kept"), []byte("synced"), 0o644))
	syncPath(t, filepath.Join(mnt, "kept"))
	must(t, os.WriteFile(filepath.Join(mnt, "gone"), []byte("old"), 0o644))
	syncPath(t, filepath.Join(mnt, "gone"))
	must(t, os.WriteFile(filepath.Join(mnt, "renamed"), []byte("r"), 0o644))
	syncPath(t, filepath.Join(mnt, "renamed"))
	must(t, os.WriteFile(filepath.Join(mnt, "mapped"), make([]byte, 8192), 0o644))
	syncPath(t, filepath.Join(mnt, "mapped"))
	syncPath(t, mnt) // the directory: kept, gone, renamed, mapped are durable entries
	must(t, os.WriteFile(filepath.Join(mnt, "nodirsync"), []byte("data synced, entry not"), 0o644))
	syncPath(t, filepath.Join(mnt, "nodirsync"))

	// After the directory's sync: unsynced data, an unlink, a rename.
	f, err := os.OpenFile(filepath.Join(mnt, "kept"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(" and not synced")
	must(t, err)
	f.Close()
	must(t, os.Remove(filepath.Join(mnt, "gone")))
	must(t, os.Rename(filepath.Join(mnt, "renamed"), filepath.Join(mnt, "renamed2")))

	// A write through a shared mapping, made durable by msync alone.
	writeThroughMapping(t, filepath.Join(mnt, "mapped"))
	st := fsys.Stats()
	if st.FileSyncs < 6 || st.DirSyncs != 1 {
		t.Errorf("stats %+v: want at least 6 file syncs (msync included) and 1 directory sync", st)
	}

	cut(t, fsys)
	if got, _ := read(t, filepath.Join(backing, "kept")); got != "synced" {
		t.Errorf("kept holds %q after the cut, want the synced %q", got, "synced")
	}
	if _, ok := read(t, filepath.Join(backing, "nodirsync")); ok {
		t.Error("nodirsync exists after the cut, though its directory was never synced after its create")
	}
	if got, ok := read(t, filepath.Join(backing, "gone")); !ok || got != "old" {
		t.Errorf("gone = %q, %v after the cut, want its synced contents back (the unlink was not synced)", got, ok)
	}
	if _, ok := read(t, filepath.Join(backing, "renamed2")); ok {
		t.Error("renamed2 exists after the cut, though the rename was not synced")
	}
	if got, ok := read(t, filepath.Join(backing, "renamed")); !ok || got != "r" {
		t.Errorf("renamed = %q, %v after the cut, want it back", got, ok)
	}
	got, _ := read(t, filepath.Join(backing, "mapped"))
	if want := "through the mapping"; !bytes.Equal([]byte(got[4096:4096+len(want)]), []byte(want)) {
		t.Errorf("mapped[4096:] = %q after the cut, want the msynced %q", got[4096:4096+len(want)], want)
	}
	if got[100] != 0 {
		t.Errorf("mapped[100:] = %q after the cut, want zeros: that write was never synced", got[100:115])
	}
}

// TestCutAtSync checks that the n-th sync cuts the power instead of
// completing, and that nothing after it becomes durable.
func TestCutAtSync(t *testing.T) {
	fsys, backing, mnt := mount(t)
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	syncPath(t, mnt)
	fsys.CutAtSync(2)
	_, err = f.WriteString("one")
	must(t, err)
	must(t, f.Sync())
	_, err = f.WriteString(" two")
	must(t, err)
	if err := f.Sync(); err == nil {
		t.Fatal("the second sync succeeded; want EIO, the power cut")
	}
	select {
	case <-fsys.Cut():
	default:
		t.Fatal("Cut is not closed after the cutting sync")
	}
	if _, err := f.WriteString(" three"); err == nil {
		t.Error("a write after the cut succeeded; want EIO")
	}
	f.Close()
	cut(t, fsys)
	if got, _ := read(t, filepath.Join(backing, "f")); got != "one" {
		t.Errorf("f holds %q after the cut, want %q", got, "one")
	}
}

// TestTruncatingOpen checks that a truncation (an open with O_TRUNC reaches
// the file system as a setattr) drops the old contents from the durable
// image once the file is synced: the hole a later write leaves reads as
// zeros, not as the old bytes.
func TestTruncatingOpen(t *testing.T) {
	fsys, backing, mnt := mount(t)
	p := filepath.Join(mnt, "f")
	must(t, os.WriteFile(p, []byte("0123456789old"), 0o644))
	syncPath(t, p)
	syncPath(t, mnt)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("ab"), 0)
	must(t, err)
	_, err = f.WriteAt([]byte("z"), 10)
	must(t, err)
	must(t, f.Sync())
	f.Close()
	cut(t, fsys)
	if got, _ := read(t, filepath.Join(backing, "f")); got != "ab\x00\x00\x00\x00\x00\x00\x00\x00z" {
		t.Errorf("f holds %q after the cut, want %q", got, "ab\x00\x00\x00\x00\x00\x00\x00\x00z")
	}
}

// TestCutAtSyncOf checks the named sync points: syncs of other files pass,
// the n-th of a matching file cuts the power, either failing (nothing of it
// durable) or, with After, once it completed (all of it durable, nothing
// after).
func TestCutAtSyncOf(t *testing.T) {
	for _, after := range []bool{false, true} {
		fsys, backing, mnt := mount(t)
		other, err := os.Create(filepath.Join(mnt, "other"))
		must(t, err)
		f, err := os.Create(filepath.Join(mnt, "x.seg"))
		must(t, err)
		syncPath(t, mnt)
		fsys.CutAtSyncOf(SyncPoint{Name: "segment", Match: func(n string) bool { return strings.HasSuffix(n, ".seg") }, After: after}, 2)
		_, err = f.WriteString("one")
		must(t, err)
		must(t, f.Sync())
		_, err = other.WriteString("o")
		must(t, err)
		must(t, other.Sync()) // another file: not counted
		_, err = f.WriteString(" two")
		must(t, err)
		err = f.Sync()
		if after && err != nil {
			t.Fatalf("After: the point's sync failed: %v", err)
		}
		if !after && err == nil {
			t.Fatal("the point's sync succeeded; want EIO, the power cut")
		}
		select {
		case <-fsys.Cut():
		default:
			t.Fatal("Cut is not closed after the point's sync")
		}
		if err := other.Sync(); err == nil {
			t.Error("a sync after the cut succeeded")
		}
		f.Close()
		other.Close()
		cut(t, fsys)
		want := "one"
		if after {
			want = "one two"
		}
		if got, _ := read(t, filepath.Join(backing, "x.seg")); got != want {
			t.Errorf("After=%t: x.seg holds %q after the cut, want %q", after, got, want)
		}
	}
}

// TestCutAfterSync checks that the n-th sync completes, its data durable,
// before the power is cut, and that Syncs names every sync counted in
// order, a directory's with a trailing slash.
func TestCutAfterSync(t *testing.T) {
	fsys, backing, mnt := mount(t)
	f, err := os.Create(filepath.Join(mnt, "f"))
	must(t, err)
	defer f.Close()
	syncPath(t, mnt)
	fsys.CutAfterSync(2)
	_, err = f.WriteString("one")
	must(t, err)
	must(t, f.Sync())
	_, err = f.WriteString(" two")
	must(t, err)
	if err := f.Sync(); err != nil {
		t.Fatalf("the second sync failed: %v; want it to complete before the cut", err)
	}
	select {
	case <-fsys.Cut():
	default:
		t.Fatal("Cut is not closed after the second sync")
	}
	if _, err := f.WriteString(" three"); err == nil {
		t.Error("a write after the cut succeeded; want EIO")
	}
	if got, want := strings.Join(fsys.Syncs(), " "), filepath.Base(backing)+"/ f f"; got != want {
		t.Errorf("Syncs() = %q, want %q", got, want)
	}
	f.Close()
	cut(t, fsys)
	if got, _ := read(t, filepath.Join(backing, "f")); got != "one two" {
		t.Errorf("f holds %q after the cut, want %q", got, "one two")
	}
}
