package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

func countKeys(t *testing.T, s *Store, prefix []byte) int {
	t.Helper()
	n := 0
	err := rawView(s, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func graphPut(thread, ns, id string, blobs ...core.GraphBlob) *core.GraphPut {
	versions := map[string]string{}
	for _, b := range blobs {
		versions[b.Channel] = b.Version
	}
	return &core.GraphPut{Checkpoint: core.GraphCheckpoint{
		ThreadID: thread, NS: ns, ID: id, MetadataJSON: "{}", ChannelVersions: versions,
		Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2},
	}, Blobs: blobs}
}

func gblob(ch, ver string, data []byte) core.GraphBlob {
	return core.GraphBlob{Channel: ch, Version: ver, Value: core.GraphValue{Type: "bytes", Data: data, Size: int64(len(data))}}
}

// fillThread writes n checkpoints with a blob and writes each.
func fillThread(t *testing.T, s *Store, thread string, n, writes int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%04d", i)
		if _, err := s.PutCheckpoint(ctx, graphPut(thread, "", id, gblob("a", id, []byte("A")))); err != nil {
			t.Fatal(err)
		}
		w := &core.GraphWrites{ThreadID: thread, CheckpointID: id, TaskID: "task"}
		for j := range writes {
			w.Writes = append(w.Writes, core.GraphWrite{TaskID: "task", Idx: int32(j), Channel: "c", Value: core.GraphValue{Data: []byte("1"), Size: 1}})
		}
		if _, err := s.PutWrites(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
}

func threadKeys(t *testing.T, s *Store, thread string) int {
	n := 0
	for _, k := range graphDataKinds {
		n += countKeys(t, s, graphKey(k, thread))
	}
	return n
}

func graphHead(t *testing.T, s *Store, thread string) *storagev1.GraphThreadRecord {
	t.Helper()
	var h *storagev1.GraphThreadRecord
	if err := s.view(ctx, func(tx *tx) error {
		var err error
		h, err = threadHead(tx, thread)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

func latest(t *testing.T, s *Store, thread string) string {
	t.Helper()
	var id string
	if _, err := s.GetCheckpoint(ctx, thread, "", "", func(tp *core.GraphTuple) error { id = tp.Checkpoint.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGraphInterruptedDelete is a crash just after a delete's tombstone
// commit: readers see the thread as empty at once, and the next Open
// finishes the purge.
func TestGraphInterruptedDelete(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	fillThread(t, s, "big", 30, 50) // 1,560 records: two purge batches
	fillThread(t, s, "other", 2, 2)
	if err := s.update(func(tx *tx) error {
		return put(tx, graphThreadKey("big"), &storagev1.GraphThreadRecord{Deleted: true, DeletedThrough: "0029", Purging: true})
	}); err != nil {
		t.Fatal(err)
	}
	if id := latest(t, s, "big"); id != "" {
		t.Fatalf("a thread being deleted shows checkpoint %q", id)
	}
	if n := threadKeys(t, s, "big"); n < 1500 {
		t.Fatalf("only %d records before the purge", n)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	if n := threadKeys(t, s, "big"); n != 0 {
		t.Fatalf("%d records left after Open finished the delete", n)
	}
	if h := graphHead(t, s, "big"); h == nil || h.Purging || !h.Deleted || h.DeletedThrough != "0029" {
		t.Fatalf("tombstone after the purge: %v", h)
	}
	if id := latest(t, s, "other"); id != "0001" {
		t.Fatalf("the other thread's latest is %q", id)
	}
	// The late-write rule holds after the recovery.
	res, err := s.PutWrites(ctx, &core.GraphWrites{ThreadID: "big", CheckpointID: "0010", TaskID: "t",
		Writes: []core.GraphWrite{{TaskID: "t", Idx: 0, Channel: "c"}}})
	if err != nil || !res.DroppedLate {
		t.Fatalf("late write after recovery: %+v %v", res, err)
	}
}

// TestGraphInterruptedCopy is a crash during a copy: the target is hidden
// while copying, and Open removes what was copied.
func TestGraphInterruptedCopy(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	fillThread(t, s, "dst", 3, 2)
	if err := s.update(func(tx *tx) error {
		return put(tx, graphThreadKey("dst"), &storagev1.GraphThreadRecord{Copying: true})
	}); err != nil {
		t.Fatal(err)
	}
	if id := latest(t, s, "dst"); id != "" {
		t.Fatalf("a thread being copied into shows checkpoint %q", id)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	if n := threadKeys(t, s, "dst"); n != 0 {
		t.Fatalf("%d records of the interrupted copy left", n)
	}
	if h := graphHead(t, s, "dst"); h == nil || h.Copying || h.Purging {
		t.Fatalf("head after undoing the copy: %v", h)
	}
	if _, err := s.PutCheckpoint(ctx, graphPut("dst", "", "9")); err != nil {
		t.Fatal(err)
	}
	if id := latest(t, s, "dst"); id != "9" {
		t.Fatalf("the thread is not usable after the undone copy: latest %q", id)
	}
}

// TestGraphStagedUploadRemovedAtOpen is a crash during an upload: its
// staged chunks are removed by the next Open and nothing is visible.
func TestGraphStagedUploadRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	p := graphPut("t", "", "1")
	p.Checkpoint.Value = core.GraphValue{Type: "bytes", Size: 8 << 20}
	up, err := s.BeginUpload(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Write(ctx, make([]byte, 5<<20)); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, graphKey(kindGraphChunk, "t")); n < 3 {
		t.Fatalf("%d chunks staged, want at least 3", n)
	}
	if id := latest(t, s, "t"); id != "" {
		t.Fatalf("a staged upload is visible: %q", id)
	}
	s.Close() // the process ends mid-upload
	s = openT(t, dir)
	defer s.Close()
	for _, k := range []byte{kindGraphChunk, kindGraphUpload} {
		if n := countKeys(t, s, graphKey(k, "t")); n != 0 {
			t.Fatalf("%d %s records left after Open", n, graphKindName(k))
		}
	}
}

// TestGraphDiskGuard checks that graph writes are refused below the disk
// reserve, reads keep working, and writes resume.
func TestGraphDiskGuard(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	fillThread(t, s, "t", 1, 1)
	p := graphPut("u", "", "1")
	p.Checkpoint.Value = core.GraphValue{Type: "bytes", Size: 4 << 20}
	up, err := s.BeginUpload(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	free := uint64(1 << 40)
	var mu sync.Mutex
	s.eng.statfs = func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }
	setFree := func(n uint64) { mu.Lock(); free = n; mu.Unlock() }
	setFree(s.eng.reserve - 1)
	writes := map[string]func() error{
		"put": func() error { _, err := s.PutCheckpoint(ctx, graphPut("t", "", "9")); return err },
		"writes": func() error {
			_, err := s.PutWrites(ctx, &core.GraphWrites{ThreadID: "t", CheckpointID: "0000", TaskID: "x",
				Writes: []core.GraphWrite{{TaskID: "x", Idx: 0, Channel: "c"}}})
			return err
		},
		"upload":  func() error { return up.Write(ctx, make([]byte, 4<<20)) },
		"delete":  func() error { return s.DeleteThread(ctx, "t") },
		"copy":    func() error { _, err := s.CopyThread(ctx, "t", "t2"); return err },
		"prune":   func() error { _, err := s.Prune(ctx, []string{"t"}, core.PruneDelete); return err },
		"by runs": func() error { _, err := s.DeleteForRuns(ctx, []string{"r"}); return err },
	}
	for _, name := range []string{"put", "writes", "upload", "delete", "copy", "prune"} {
		if err := writes[name](); !errors.Is(err, core.ErrDiskFull) {
			t.Errorf("%s below the reserve: %v, want ErrDiskFull", name, err)
		}
	}
	if err := writes["by runs"](); err != nil {
		t.Errorf("a DeleteForRuns that matches nothing writes nothing: %v", err)
	}
	if id := latest(t, s, "t"); id != "0000" {
		t.Fatalf("read while full: latest %q", id)
	}
	setFree(s.eng.reserve)
	if err := writes["put"](); err != nil {
		t.Fatalf("put after space returned: %v", err)
	}
	if id := latest(t, s, "t"); id != "9" {
		t.Fatalf("latest after space returned: %q", id)
	}
}

// TestGraphHighWaterMark checks that graph commits advance the commit
// sequence the high-water mark records, that concurrent puts are group
// committed, and that a store rolled back behind graph commits is refused.
func TestGraphHighWaterMark(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	fillThread(t, s, "t", 1, 1)
	s.Close()
	old := filepath.Join(t.TempDir(), "old")
	copyDir(t, dir, old)
	s = openT(t, dir)
	st0 := s.Stats()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.PutCheckpoint(ctx, graphPut(fmt.Sprintf("c%d", i), "", "1", gblob("a", "1", []byte("x")))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.Requests-st0.Requests != 32 || st.Seq <= st0.Seq {
		t.Fatalf("stats %+v after %+v: 32 graph puts not counted", st, st0)
	}
	t.Logf("32 concurrent graph puts: %d commits", st.Commits-st0.Commits)
	s.Close()
	hwm, err := os.ReadFile(filepath.Join(dir, HWMFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(bytes.TrimSpace(hwm)) != fmt.Sprint(st.Seq) {
		t.Fatalf("high-water mark %q, want %d", hwm, st.Seq)
	}
	os.RemoveAll(dir)
	copyDir(t, old, dir)
	os.WriteFile(filepath.Join(dir, HWMFile), hwm, 0o600)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("open behind graph commits: %v, want ErrBehind", err)
	}
}

// TestGraphVerify checks that Verify reads graph records and reports a
// damaged one.
func TestGraphVerify(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	fillThread(t, s, "t", 2, 2)
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	damage(t, s, graphCheckpointKey("t", "", "0001"))
	rep, err = s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 1 {
		t.Fatalf("verify of a damaged checkpoint: %+v %v", rep, err)
	}
	if _, err := s.GetCheckpoint(ctx, "t", "", "", func(*core.GraphTuple) error { return nil }); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("get of a damaged checkpoint: %v, want ErrCheckpointCorrupt", err)
	}
}

func TestGraphKeys(t *testing.T) {
	var keys [][]byte
	for _, idx := range []int32{-4, -1, 0, 1, 255, 256, 1 << 24} {
		k := graphWriteKey("th", "ns", "id", "task", idx)
		th, nsName, id, task, got, ok := decodeGraphWriteKey(k)
		if !ok || th != "th" || nsName != "ns" || id != "id" || task != "task" || got != idx {
			t.Fatalf("decode %x: %q %q %q %q %d %v", k, th, nsName, id, task, got, ok)
		}
		keys = append(keys, k)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatal("write keys do not sort by index, negative first")
	}
	// One thread's or namespace's keys never prefix another's.
	if bytes.HasPrefix(graphCheckpointKey("ab", "", "1"), graphKey(kindGraphCheckpoint, "a")) ||
		bytes.HasPrefix(graphCheckpointKey("t", "ab", "1"), graphScope(kindGraphCheckpoint, "t", "a")) {
		t.Fatal("a key falls under another thread's or namespace's prefix")
	}
}

// TestGraphDeleteIdleThreads deletes the threads not written since the
// cutoff, keeps the others, and forgets tombstones older than the cutoff.
func TestGraphDeleteIdleThreads(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fillThread(t, s, "old", 3, 2)
	fillThread(t, s, "gone", 1, 1)
	if err := s.DeleteThread(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	fillThread(t, s, "new", 1, 1)
	n, err := s.DeleteIdleThreads(ctx, now.Add(-time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d idle threads (%v), want 1", n, err)
	}
	if threadKeys(t, s, "old") != 0 || latest(t, s, "old") != "" {
		t.Fatal("the idle thread was not deleted")
	}
	if h := graphHead(t, s, "old"); h == nil || !h.Deleted {
		t.Fatalf("the idle thread has no tombstone: %v", h)
	}
	if graphHead(t, s, "gone") != nil {
		t.Fatal("a tombstone older than the cutoff was kept")
	}
	if latest(t, s, "new") != "0000" {
		t.Fatal("a thread written since the cutoff was deleted")
	}
}

// FuzzGraphKeys checks that the graph key encoding inverts, keeps threads
// and namespaces apart, and that decoding arbitrary bytes never panics.
func FuzzGraphKeys(f *testing.F) {
	f.Add("t", "", "1ef-1", "task", int32(0), []byte{kindGraphWrite, 't', 0})
	f.Add("thread:\u00e9", "parent:1|child:2", "z", "t\x01", int32(-4), []byte{kindGraphWrite, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, thread, nsName, id, task string, idx int32, raw []byte) {
		decodeGraphWriteKey(raw)
		splitGraphKey(raw, 3)
		if strings.ContainsRune(thread+nsName+id+task, 0) {
			return
		}
		th, n, i, tk, x, ok := decodeGraphWriteKey(graphWriteKey(thread, nsName, id, task, idx))
		if !ok || th != thread || n != nsName || i != id || tk != task || x != idx {
			t.Fatalf("write key of %q %q %q %q %d decodes to %q %q %q %q %d %v", thread, nsName, id, task, idx, th, n, i, tk, x, ok)
		}
		th, parts, _, ok := splitGraphKey(graphCheckpointKey(thread, nsName, id), 2)
		if !ok || th != thread || len(parts) != 2 || parts[0] != nsName || parts[1] != id {
			t.Fatalf("checkpoint key of %q %q %q splits to %q %q %v", thread, nsName, id, th, parts, ok)
		}
		if other := thread + "x"; bytes.HasPrefix(graphCheckpointKey(other, nsName, id), graphKey(kindGraphCheckpoint, thread)) {
			t.Fatalf("thread %q's key falls under thread %q's prefix", other, thread)
		}
	})
}

// TestGraphConcurrentWrites sends the writes of many tasks of one thread at
// once, as LangGraph's parallel tasks do: every write is stored, the same
// (task, idx) keeps its first value, and the calls share commits.
func TestGraphConcurrentWrites(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if _, err := s.PutCheckpoint(ctx, graphPut("t", "", "1")); err != nil {
		t.Fatal(err)
	}
	st0 := s.Stats()
	const tasks, calls = 16, 4
	var wg sync.WaitGroup
	var firsts sync.Map
	for task := range tasks {
		for call := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("task%02d", task)
				v := fmt.Sprintf("%d", call)
				res, err := s.PutWrites(ctx, &core.GraphWrites{ThreadID: "t", CheckpointID: "1", TaskID: id,
					Writes: []core.GraphWrite{{TaskID: id, Idx: 0, Channel: "c", Value: core.GraphValue{Data: []byte(v), Size: 1}}}})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Written == 1 {
					if _, dup := firsts.LoadOrStore(id, v); dup {
						t.Errorf("two calls inserted (%s, 0)", id)
					}
				}
			}()
		}
	}
	wg.Wait()
	var tp *core.GraphTuple
	if _, err := s.GetCheckpoint(ctx, "t", "", "1", func(x *core.GraphTuple) error { tp = x; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(tp.Writes) != tasks {
		t.Fatalf("%d writes stored, want %d", len(tp.Writes), tasks)
	}
	for _, w := range tp.Writes {
		if first, _ := firsts.Load(w.TaskID); first != string(w.Value.Data) {
			t.Errorf("(%s, 0) holds %q, but the call that inserted it sent %q", w.TaskID, w.Value.Data, first)
		}
	}
	st := s.Stats()
	t.Logf("%d PutWrites calls on one thread: %d commits", st.Requests-st0.Requests, st.Commits-st0.Commits)
}
