package badgerstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore/internal/wal"
	"github.com/savepoint-dev/savepoint/daemon/core"
)

func setCheckpointInterval(t *testing.T, d time.Duration) {
	old := checkpointInterval
	checkpointInterval = d
	t.Cleanup(func() { checkpointInterval = old })
}

// copyTree copies the files under src into dst (created), those for which
// keep returns true.
func copyTree(t *testing.T, src, dst string, keep func(rel string) bool) {
	t.Helper()
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		if !keep(rel) {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(filepath.Join(dst, rel), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func all(string) bool { return true }

func isSegment(rel string) bool {
	return strings.HasPrefix(rel, WALDir+string(filepath.Separator)) && strings.HasSuffix(rel, ".seg")
}

// powerCutImage builds the data directory a power cut leaves after Badger
// lost what it had not synced: dir is opened and closed with session "a"
// saved twice (so Badger is durable and the mark at its end), then opened
// again with no background checkpoint and session "b" saved three times,
// acknowledged from the log alone. The image holds Badger's files and the
// mark as they were at the first close, and the log's segments as the
// second run left them; the high-water mark records the last commit. It
// returns the image and that commit's sequence number.
func powerCutImage(t *testing.T, key []byte) (string, uint64) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	saveN(t, s, "a", 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	copyTree(t, dir, base, all)

	setCheckpointInterval(t, time.Hour)
	s, err = Open(dir, Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saveN(t, s, "b", 3)
	seq := s.Stats().Seq
	image := t.TempDir()
	copyTree(t, base, image, func(rel string) bool { return !isSegment(rel) && rel != HWMFile })
	copyTree(t, dir, image, isSegment)
	if err := writeHWM(image, seq); err != nil {
		t.Fatal(err)
	}
	return image, seq
}

// TestReplayAfterBadgerLostItsUnsyncedTail: commits acknowledged from the
// log alone, which Badger lost, are replayed into it at Open, with the
// sequence number of the last one; with a key as without.
func TestReplayAfterBadgerLostItsUnsyncedTail(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("0123456789abcdef")} {
		image, seq := powerCutImage(t, key)
		s, err := Open(image, Options{EncryptionKey: key})
		if err != nil {
			t.Fatalf("key %t: %v", key != nil, err)
		}
		cp, err := s.Checkpoint(ctx, "b", 0)
		if err != nil || cp.Revision != 3 {
			t.Fatalf("key %t: session b after the replay: revision %v, %v; want 3", key != nil, cp, err)
		}
		if got := s.Info().LastCommit; got != seq {
			t.Errorf("key %t: the last commit after the replay is %d, want %d", key != nil, got, seq)
		}
		saveN2(t, s, "b", 3, 1) // writing goes on after the replayed commits
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openKeyT(t, image, key)
		if cp, err := s.Checkpoint(ctx, "b", 0); err != nil || cp.Revision != 4 {
			t.Fatalf("key %t: session b after a clean reopen: %v, %v", key != nil, cp, err)
		}
		s.Close()
	}
}

func openKeyT(t *testing.T, dir string, key []byte) *Store {
	t.Helper()
	s, err := Open(dir, Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// saveN2 saves session sid n times from revision from.
func saveN2(t *testing.T, s *Store, sid string, from, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: uint64(from + i),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: "{}"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHighWaterMarkOnTheLogsLSN: the high-water mark is checked against the
// log's last LSN, not Badger's sequence number, which a power cut leaves
// behind: a store whose log holds every acknowledged commit opens; one
// whose log lost its tail is refused with ErrBehind, and served with
// AcceptDataLoss.
func TestHighWaterMarkOnTheLogsLSN(t *testing.T) {
	image, seq := powerCutImage(t, nil)
	badgerSeq := func(dir string) uint64 {
		t.Helper()
		m, _, err := wal.ReadMark(filepath.Join(dir, WALDir))
		if err != nil {
			t.Fatal(err)
		}
		return m.LSN()
	}
	lost, pristine := t.TempDir(), t.TempDir()
	copyTree(t, image, lost, all)
	copyTree(t, image, pristine, all) // opening image moves its mark
	if b := badgerSeq(image); b >= seq {
		t.Fatalf("the image's Badger is at commit %d, not behind the last commit %d", b, seq)
	}
	s, err := Open(image, Options{})
	if err != nil {
		t.Fatalf("a store whose Badger is behind its high-water mark but whose log is not: %v", err)
	}
	s.Close()

	// The log loses everything after the mark.
	m, _, err := wal.ReadMark(filepath.Join(lost, WALDir))
	if err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(lost, WALDir, wal.SegmentName(m.Segment()))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := zeroRange(f, m.Offset(), 64<<10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Open(lost, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("a store whose log lost acknowledged commits opened: %v, want ErrBehind", err)
	}
	s, err = Open(lost, Options{AcceptDataLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Checkpoint(ctx, "b", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("session b of the lost commits: %v", err)
	}

	// Badger rolled back behind the mark (its files those of a store that
	// never saw session a), the log whole: the replay of the records after
	// the mark must not hide that the commits before it are gone.
	empty := t.TempDir()
	s2, err := Open(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	rolled := t.TempDir()
	copyTree(t, empty, rolled, func(rel string) bool { return !strings.HasPrefix(rel, WALDir) && rel != HWMFile })
	copyTree(t, pristine, rolled, func(rel string) bool { return strings.HasPrefix(rel, WALDir) || rel == HWMFile })
	_, err = Open(rolled, Options{})
	t.Logf("Badger behind the mark: %v", err)
	if !errors.Is(err, ErrBehind) {
		t.Fatalf("a store whose Badger lost the commits before the log's mark opened: %v, want ErrBehind", err)
	}
}

// TestCommitSyncsOnlyTheLog: a commit is made durable by one sync of the
// log and none of Badger; Badger is synced by the checkpoint at Close.
func TestCommitSyncsOnlyTheLog(t *testing.T) {
	setCheckpointInterval(t, time.Hour)
	s := openT(t, t.TempDir())
	var logSyncs, badgerSyncs atomic.Int32
	sync0, bsync0 := s.eng.sync, s.eng.badgerSync
	s.eng.sync = func() error { logSyncs.Add(1); return sync0() }
	s.eng.badgerSync = func() error { badgerSyncs.Add(1); return bsync0() }
	before := s.Stats()
	saveN(t, s, "c", 10)
	commits := s.Stats().Commits - before.Commits
	if logSyncs.Load() != int32(commits) || badgerSyncs.Load() != 0 {
		t.Fatalf("%d commits made %d syncs of the log and %d of Badger; want one of the log each, none of Badger",
			commits, logSyncs.Load(), badgerSyncs.Load())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if badgerSyncs.Load() != 1 {
		t.Fatalf("Close synced Badger %d times, want once", badgerSyncs.Load())
	}
}

// TestCheckpointRecyclesSegments: under a steady write load the background
// checkpoint moves the mark and recycles the segments behind it, so the log
// keeps a bounded number of files, and a reopen replays nothing.
func TestCheckpointRecyclesSegments(t *testing.T) {
	setSegmentSize(t, 256<<10)
	setCheckpointInterval(t, 20*time.Millisecond)
	dir := t.TempDir()
	s := openT(t, dir)
	big := strings.Repeat("x", 4000)
	for i := range 300 {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "r", ExpectedRevision: uint64(i),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + big + `"`}}}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(50 * time.Millisecond) // let a checkpoint run
		}
	}
	time.Sleep(100 * time.Millisecond)
	recycled := s.eng.wal.Recycled()
	files, err := wal.List(filepath.Join(dir, WALDir))
	if err != nil {
		t.Fatal(err)
	}
	if recycled == 0 || len(files.Segs)+len(files.Spares) > 2+wal.MaxSpares+2 {
		t.Fatalf("after 1.2 MiB of saves in 256 KiB segments: %d recycled, segments %v and spares %v left", recycled, files.Segs, files.Spares)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var replayed int
	w, res, err := wal.Open(filepath.Join(dir, WALDir), nil, 0, func(uint64, []byte) error { replayed++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if replayed != 0 || res.Cut {
		t.Fatalf("after a clean close the log replays %d records (cut %t); want none", replayed, res.Cut)
	}
}

// TestVerifyChecksTheLog: a damaged record in the part of the log still
// kept is reported by Verify, outside any session.
func TestVerifyChecksTheLog(t *testing.T) {
	setCheckpointInterval(t, time.Hour)
	dir := t.TempDir()
	s := openT(t, dir)
	defer s.Close()
	saveN(t, s, "v", 5)
	if rep, err := s.Verify(ctx); err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify of a sound store: %+v, %v", rep, err)
	}
	_, applied := s.eng.wal.Positions()
	seg := filepath.Join(dir, WALDir, wal.SegmentName(applied.Segment()))
	patchFile(t, seg, applied.Offset()-10, []byte{0xee}) // inside the last record
	rep, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damaged) != 1 || rep.Damaged[0].SessionID != "" || !strings.Contains(rep.Damaged[0].Problem, "write-ahead log") {
		t.Fatalf("verify after damaging the log's last record: %+v", rep.Damaged)
	}
	t.Logf("verify: %s", rep.Damaged[0].Problem)
}

// TestNewSegmentOnAFullDisk: a full disk met making the next segment
// answers the save that needed it ErrDiskFull and leaves the store serving;
// once there is room, saves go on, and everything acknowledged reads back
// after a reopen.
func TestNewSegmentOnAFullDisk(t *testing.T) {
	setSegmentSize(t, 64<<10)
	setCheckpointInterval(t, time.Hour) // no spare prepared in the background
	var full atomic.Bool
	create := wal.CreateSegment
	wal.CreateSegment = func(dir, name string, size int64) error {
		if full.Load() {
			return fmt.Errorf("fallocate: %w", syscall.ENOSPC)
		}
		return create(dir, name, size)
	}
	t.Cleanup(func() { wal.CreateSegment = create })
	dir := t.TempDir()
	s := openT(t, dir)
	full.Store(true)
	msg := strings.Repeat("m", 3000)
	rev := uint64(0)
	var refused error
	for i := 0; i < 100 && refused == nil; i++ {
		_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "f", ExpectedRevision: rev,
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + msg + `"`}}})
		if err != nil {
			refused = err
			break
		}
		rev++
	}
	if !errors.Is(refused, core.ErrDiskFull) {
		t.Fatalf("saves past a segment with no room for the next: %v, want ErrDiskFull", refused)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the store failed on a full disk: %v", err)
	}
	full.Store(false)
	saveN2(t, s, "f", int(rev), 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	defer s.Close()
	if cp, err := s.Checkpoint(ctx, "f", 0); err != nil || cp.Revision != rev+3 {
		t.Fatalf("after a reopen: %v, %v; want revision %d", cp, err, rev+3)
	}
}

// setSegmentSize sets the log's segment size for the test.
func setSegmentSize(t *testing.T, n int64) {
	old := wal.SegmentSize
	wal.SegmentSize = n
	t.Cleanup(func() { wal.SegmentSize = old })
}

// patchFile writes b at off in the file at path.
func patchFile(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// zeroRange writes n zeros at off in f.
func zeroRange(f *os.File, off, n int64) error {
	_, err := f.WriteAt(make([]byte, n), off)
	return err
}
