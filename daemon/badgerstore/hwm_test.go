package badgerstore

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// failMark makes every later write of s's high-water mark fail with errno
// until the returned function restores it.
func failMark(s *Store, errno syscall.Errno) (restore func()) {
	fail := func(dir string, _ uint64) error {
		return &fs.PathError{Op: "write", Path: dir + "/" + HWMFile + ".tmp", Err: errno}
	}
	s.hwm.write.Store(&fail)
	return func() {
		w := writeHWM
		s.hwm.write.Store(&w)
	}
}

// eventually retries fn every 50 ms for up to 5 s (the mark is rewritten
// once a second) and fails the test with its last error.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err = fn(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// TestMarkENOSPCIsDiskFull: a high-water mark that cannot be written for
// lack of space refuses writes with DISK_FULL, reads still served, and
// writes resume once the mark is written again.
func TestMarkENOSPCIsDiskFull(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "s", 1)
	restore := failMark(s, syscall.ENOSPC)
	rev := uint64(1)
	eventually(t, "a save while the mark cannot be written", func() error {
		res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev})
		if err == nil {
			rev = res.Revision // acknowledged before the first failed write of the mark
			return errors.New("acknowledged")
		}
		if !errors.Is(err, core.ErrDiskFull) {
			t.Fatalf("save while the mark cannot be written: %v, want ErrDiskFull", err)
		}
		return nil
	})
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Revision != rev {
		t.Fatalf("read while the mark cannot be written: %+v %v", cp, err)
	}
	select {
	case <-s.Failed():
		t.Fatal("a full disk under the mark failed the store")
	default:
	}
	restore()
	eventually(t, "a save once the mark is written again", func() error {
		_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev})
		return err
	})
}

// TestMarkEIOIsFatal: any other failure to write the high-water mark stops
// the store from acknowledging writes, as a failed sync does.
func TestMarkEIOIsFatal(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "s", 1)
	failMark(s, syscall.EIO)
	saveN(t, s, "t", 1) // a commit the mark must now cover
	select {
	case <-s.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("Failed not closed after the mark's write failed with EIO")
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "u"}); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("save after the mark's failure: %v, want ErrUnavailable", err)
	}
}

// TestMarkWaitsForTheCheckpointLock: the high-water mark is not rewritten
// (nor its directory synced) while the checkpoint lock is held, as it is
// during a value-log GC's rewrite, and is rewritten once it is released.
func TestMarkWaitsForTheCheckpointLock(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "a", 1)
	var writes atomic.Int32
	w := func(dir string, seq uint64) error { writes.Add(1); return writeHWM(dir, seq) }
	s.hwm.write.Store(&w)
	s.eng.ckptMu.Lock()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "b"}); err != nil {
		s.eng.ckptMu.Unlock()
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two intervals of the mark
	n := writes.Load()
	s.eng.ckptMu.Unlock()
	if n != 0 {
		t.Fatalf("the mark was rewritten %d times while the checkpoint lock was held", n)
	}
	eventually(t, "the mark rewritten once the lock is released", func() error {
		if writes.Load() == 0 {
			return errors.New("not rewritten")
		}
		return nil
	})
}
