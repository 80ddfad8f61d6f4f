package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/crashtest/faultfs"
)

// manifestRewrite is the file Badger writes, syncs and renames over
// MANIFEST whenever it rewrites the MANIFEST (manifest.go helpRewrite):
// at runtime past 10,000 table deletions, and when it creates a store.
const manifestRewrite = "MANIFEST-REWRITE"

// TestPowerCutAtFirstStart cuts the power at every sync of a brand-new
// savepointd's first start, one cut per run: it counts the syncs of a clean
// first start, then for k = 1, 2, ... starts savepointd on an empty data
// directory with the power cut during its k-th sync (which fails, nothing of
// it durable) until a start serves before its k-th sync, and again with the
// power cut right after the k-th sync completes. Among them are the syncs of
// Badger's MANIFEST rewrite (MANIFEST-REWRITE, then the directory after its
// rename over MANIFEST): a store's creation runs the same helpRewrite as the
// rewrite past 10,000 table deletions. After each cut savepointd must
// restart on the durable image with no flag and no repair, serve a save and
// read it back, stop with 0, and pass savepointd verify.
func TestPowerCutAtFirstStart(t *testing.T) {
	if err := faultfs.Available(); err != nil {
		t.Skipf("power-cut harness skipped: %v", err)
	}
	bin := binary(t, false)
	clean := firstStartCut(t, bin, 0, false)
	t.Logf("a clean first start makes %d syncs before it serves: %s", len(clean.syncs), strings.Join(clean.syncs, " "))
	if !slices.Contains(clean.syncs, manifestRewrite) {
		t.Fatalf("a clean first start made no sync of %s: %s", manifestRewrite, strings.Join(clean.syncs, " "))
	}
	cuts := map[bool]int{}        // by after
	rewriteCuts := map[bool]int{} // at MANIFEST-REWRITE's sync, by after
	for _, after := range []bool{false, true} {
		when := "during"
		if after {
			when = "right after"
		}
		for k := 1; ; k++ {
			r := firstStartCut(t, bin, k, after)
			if !r.cut {
				t.Logf("sync %d: the first start served before it (%d syncs): done", k, len(r.syncs))
				break
			}
			cuts[after]++
			if r.name == manifestRewrite {
				rewriteCuts[after]++
			}
			t.Logf("power cut %s sync %d (%s): %s", when, k, r.name, r.outcome)
			if k > 4*len(clean.syncs)+20 {
				t.Fatalf("still cutting at sync %d of a first start whose clean run made %d", k, len(clean.syncs))
			}
		}
	}
	fmt.Printf("power cut at every sync of a first start: %d syncs in a clean one, %d cuts during a sync and %d right after one (%d and %d at %s), every restart served, saved, read back and verified\n",
		len(clean.syncs), cuts[false], cuts[true], rewriteCuts[false], rewriteCuts[true], manifestRewrite)
	if cuts[false] < len(clean.syncs)/2 || rewriteCuts[false] == 0 || rewriteCuts[true] == 0 {
		t.Fatalf("%d and %d cuts, %d and %d of them at %s: the test reached too little", cuts[false], cuts[true], rewriteCuts[false], rewriteCuts[true], manifestRewrite)
	}
}

// firstStart is what one run of firstStartCut saw.
type firstStart struct {
	syncs   []string // the syncs made until the start served or the cut
	cut     bool     // the power was cut before the start served
	name    string   // the file or directory of the sync at the cut
	outcome string   // the first start's end and the restart's, for the log
}

// firstStartCut starts savepointd on an empty data directory on faultfs,
// with the power cut at its k-th sync (after it completes, with after;
// never, with k 0). When the power is cut before savepointd serves, it
// kills savepointd, restores the durable image and restarts savepointd on
// it, which must serve with no flag, save a session and read it back, stop
// with 0 and pass savepointd verify; any failure fails t.
func firstStartCut(t *testing.T, bin string, k int, after bool) firstStart {
	t.Helper()
	root := t.TempDir()
	backing, mnt := filepath.Join(root, "backing"), filepath.Join(root, "data")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var fsys *faultfs.FS
	mount := func(n int) {
		var err error
		if fsys, err = faultfs.Mount(backing, mnt, filepath.Join(root, fmt.Sprint("shadow", n))); err != nil {
			t.Fatal(err)
		}
	}
	mount(0)
	t.Cleanup(func() { // after p's cleanup (registered later, run first) killed savepointd
		if fsys != nil {
			fsys.PowerCut()
			fsys.Unmount()
		}
	})
	switch {
	case k > 0 && after:
		fsys.CutAfterSync(k)
	case k > 0:
		fsys.CutAtSync(k)
	}
	p := newProc(t, bin)
	p.dir = mnt
	err := p.start()
	r := firstStart{syncs: fsys.Syncs()}
	select {
	case <-fsys.Cut():
		r.cut = true
	default:
	}
	if !r.cut {
		if err != nil {
			t.Fatalf("first start with no power cut: %v", err)
		}
		if k == 0 {
			if code := p.stop(); code != 0 {
				t.Fatalf("savepointd exited %d on SIGTERM after a clean first start", code)
			}
		}
		p.kill()
		return r
	}
	if k <= len(r.syncs) {
		r.name = r.syncs[k-1]
	}
	if err == nil {
		r.outcome = "it served all the same; "
		p.kill()
	} else {
		r.outcome = fmt.Sprintf("it exited %d (%s); ", p.exitCode(), lastLines(p.stderr.String(), 1))
	}
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Restore(); err != nil {
		t.Fatal(err)
	}
	fsys = nil
	mount(1)
	files := durableFiles(t, mnt)
	if err := p.start(); err != nil {
		t.Fatalf("cut at sync %d (%s, after=%t), durable image [%s]: the restart failed: %v", k, r.name, after, files, err)
	}
	for _, word := range []string{"heal", "repair", "accept-data-loss"} {
		if strings.Contains(strings.ToLower(p.stderr.String()), word) {
			t.Errorf("cut at sync %d (%s, after=%t): the restart's log mentions %q:\n%s", k, r.name, after, word, p.stderr)
		}
	}
	saveAndReadBack(t, p.client)
	if code := p.stop(); code != 0 {
		t.Fatalf("cut at sync %d (%s): savepointd exited %d on SIGTERM after the restart", k, r.name, code)
	}
	if code, out, errOut := runBin(bin, "verify", "--data-dir", p.dir); code != 0 {
		t.Fatalf("cut at sync %d (%s): savepointd verify exited %d: %s %s", k, r.name, code, out, errOut)
	}
	r.outcome += fmt.Sprintf("durable image [%s]; restarted in %v, saved, read back, verified", files, p.started.Round(time.Millisecond))
	return r
}

// durableFiles lists the files under dir with their sizes, for the log.
func durableFiles(t *testing.T, dir string) string {
	t.Helper()
	var fs []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			fs = append(fs, rel+"/")
		} else if fi, err := d.Info(); err == nil {
			fs = append(fs, fmt.Sprintf("%s:%d", rel, fi.Size()))
		}
		return nil
	})
	return strings.Join(fs, " ")
}

// saveAndReadBack creates a session with a small message and one for the
// value log (over the store's 512-byte value threshold), then reads the
// revision back and compares it with what was saved.
func saveAndReadBack(t *testing.T, c savepointv1.SavepointServiceClient) {
	t.Helper()
	ctx, cancel := ctxT()
	defer cancel()
	msgs := []*savepointv1.Message{
		{Role: "user", ContentJson: `"hello"`},
		{Role: "assistant", ContentJson: fmt.Sprintf("%q", strings.Repeat("v", 2048))},
	}
	resp, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "first-start", Task: "a save after the cut", AppendMessages: msgs})
	if err != nil {
		t.Fatalf("save after the restart: %v", err)
	}
	cp, got, err := readRevision(ctx, c, "first-start", resp.Revision)
	if err != nil {
		t.Fatalf("read-back after the restart: %v", err)
	}
	if cp.Revision != 1 || !slices.EqualFunc(got, msgs, func(a, b *savepointv1.Message) bool { return proto.Equal(a, b) }) {
		t.Fatalf("read-back after the restart: revision %d with %d messages, want revision 1 with the 2 saved", cp.Revision, len(got))
	}
}
