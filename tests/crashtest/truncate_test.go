package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Silent truncation. Badger's log replay stops at the first entry whose
// checksum fails and drops the rest without an error; the high-water mark
// file (rewritten at most once a second) is what turns that into a refusal.

var behindRe = regexp.MustCompile(`ends at commit (\d+) but commit (\d+) was acknowledged`)

// truncationSetup makes acknowledged writes, waits until the high-water
// mark covers them, and kills savepointd with SIGKILL.
func truncationSetup(t *testing.T, seed uint64, bigs int) (*proc, *worker, string) {
	t.Helper()
	p := newProc(t, binary(t, false))
	p.mustStart()
	h := &harness{t: t, cfg: crashConfig{}, tally: newTally()}
	w := &worker{h: h, rng: rand.New(rand.NewPCG(seed, 1))}
	for range 6 {
		w.steps(t, p.client, 60)
		for range bigs {
			ctx, cancel := ctxT()
			if err := w.do(ctx, p.client, w.bigSave()); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
	}
	time.Sleep(1500 * time.Millisecond) // > hwmInterval: the mark now names the last commit
	mark, err := os.ReadFile(filepath.Join(p.dir, "savepoint.hwm"))
	if err != nil {
		t.Fatal(err)
	}
	p.kill()
	return p, w, strings.TrimSpace(string(mark))
}

// TestTruncationWAL flips a byte in the middle of the used part of Badger's
// write-ahead log (the memtable's .mem file, where every small value lives),
// after a kill -9 that followed acknowledged writes.
func TestTruncationWAL(t *testing.T) {
	p, w, mark := truncationSetup(t, 21, 0)
	mems := filesWith(t, p.dir, ".mem")
	if len(mems) != 1 {
		t.Fatalf("want one .mem file, found %v", mems)
	}
	truncation(t, p, w, mark, mems[0])
}

// TestTruncationValueLog flips a byte in the middle of the used part of
// Badger's value log, which holds the messages over 1 MiB.
func TestTruncationValueLog(t *testing.T) {
	p, w, mark := truncationSetup(t, 22, 1)
	vlogs := filesWith(t, p.dir, ".vlog")
	if len(vlogs) == 0 {
		t.Fatal("no .vlog file")
	}
	truncation(t, p, w, mark, vlogs[len(vlogs)-1])
}

func truncation(t *testing.T, p *proc, w *worker, mark, file string) {
	name := filepath.Base(file)
	used := usedBytes(t, file)
	off := used / 2
	tail := readRange(t, file, off+1, used-off-1)
	sizeBefore := fileSize(t, file)
	was := flipByte(t, file, off)
	t.Logf("%d acknowledged writes; high-water mark %s; flipped byte %d of %s (0x%02x; %d of its %d bytes are used)",
		w.h.tally.acked.Load(), mark, off, name, was, used, sizeBefore)

	// Restart.
	err := p.start()
	if err == nil {
		// Served: then every acknowledged write must read back exactly or
		// be answered DATA_LOSS, and Verify must name the damage.
		served(t, p, w, fmt.Sprintf("flipped byte %d of %s (%d bytes used)", off, name, used))
		return
	}
	code := p.exitCode()
	msg := p.stderr.String()
	m := behindRe.FindStringSubmatch(msg)
	t.Logf("restart: exit %d: %s", code, strings.TrimSpace(msg))
	if code != 4 || m == nil {
		t.Fatalf("savepointd refused to open with exit %d and no high-water mark message; want exit 4 naming both sequence numbers", code)
	}
	if m[2] != mark {
		t.Errorf("the message names acknowledged commit %s, the mark file said %s", m[2], mark)
	}
	kept := false
	if _, err := os.Stat(file); err != nil {
		t.Logf("after the refused open %s no longer exists (Badger replayed it up to the bad entry, truncated it there, and flushed the rest to a table at close); files now: %v",
			name, dirNames(t, p.dir))
	} else {
		kept = bytes.Equal(readRange(t, file, off+1, int64(len(tail))), tail)
		t.Logf("after the refused open %s is %d bytes (was %d); the bytes after the flipped one are intact: %t", name, fileSize(t, file), sizeBefore, kept)
	}

	// With --accept-data-loss it serves what is left and logs the loss.
	if err := p.start("--accept-data-loss"); err != nil {
		t.Fatalf("--accept-data-loss: %v", err)
	}
	lossLog := ""
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, "high-water mark") {
			lossLog = l
		}
	}
	if !strings.Contains(lossLog, "lost_commits=") {
		t.Errorf("--accept-data-loss logged no loss report:\n%s", p.stderr)
	}
	t.Logf("with --accept-data-loss: %s", lossLog)
	w.verifyAll(p.client)
	w.resume(p.client)
	lost, torn, unread := w.h.tally.counts()
	damaged := verifyRPC(t, p)
	fmt.Printf("%s: flipped byte %d of %s (%d bytes used): restart exit %d %q; --accept-data-loss served and logged %q; of %d acked writes lost=%d torn=%d unreadable=%d; Verify RPC damaged=%d; refused open left the log tail intact: %t\n",
		t.Name(), off, name, used, code, m[0], strings.TrimSpace(lossLog[strings.Index(lossLog, "msg="):]),
		w.h.tally.acked.Load(), lost, torn, unread, len(damaged), kept)
	if torn > 0 || unread > 0 {
		t.Errorf("the store served after the loss has torn or unreadable writes: %v", w.h.tally.notes)
	}
	if lost == 0 {
		t.Errorf("the high-water mark refused the store, yet no acknowledged write is missing")
	}
	// The loss is accepted once: the next start needs no flag.
	if code := p.stop(); code != 0 {
		t.Errorf("stop: exit %d", code)
	}
	if err := p.start(); err != nil {
		t.Errorf("restart after --accept-data-loss: %v", err)
	}
}

// served checks a store that opened after damage: no acknowledged write
// may read back different or be silently missing; each damaged session is
// answered DATA_LOSS CHECKPOINT_CORRUPT and listed by the Verify RPC and by
// savepointd verify; the other sessions keep working.
func served(t *testing.T, p *proc, w *worker, what string) {
	t.Helper()
	var startLog []string
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			startLog = append(startLog, l)
		}
	}
	t.Logf("savepointd opened the damaged store; warnings and errors it logged at start: %d %v", len(startLog), startLog)
	w.verifyAll(p.client)
	lost, torn, unread := w.h.tally.counts()
	for _, n := range w.h.tally.notes {
		t.Log(n)
	}
	// Which sessions answer DATA_LOSS, and nothing else, on any revision.
	bad := map[string]bool{}
	for _, s := range w.sessions {
		for rev := range s.revs {
			ctx, cancel := ctxT()
			_, _, err := readRevision(ctx, p.client, s.id, rev)
			cancel()
			switch {
			case err == nil:
			case dataLoss(err):
				bad[s.id] = true
			default:
				t.Errorf("session %s revision %d: %v; want DATA_LOSS CHECKPOINT_CORRUPT", s.id, rev, err)
			}
		}
	}
	damaged := verifyRPC(t, p)
	answered := slices.Sorted(maps.Keys(bad))
	if !slices.Equal(answered, damaged) {
		t.Errorf("sessions answering DATA_LOSS %v, Verify RPC lists %v", answered, damaged)
	}
	// The others keep working: a new session, and the client's own if intact.
	if w.s != nil && bad[w.s.id] {
		w.s = nil
	}
	w.steps(t, p.client, 20)
	if code := p.stop(); code != 0 {
		t.Errorf("stop: exit %d", code)
	}
	code, out, errOut := runBin(p.bin, "verify", "--data-dir", p.dir)
	listed := 0
	for _, id := range damaged {
		if strings.Contains(out, fmt.Sprintf("%q", id)) {
			listed++
		}
	}
	fmt.Printf("%s: %s: savepointd opened and served; of %d acked writes lost=%d torn=%d unreadable=%d (all DATA_LOSS CHECKPOINT_CORRUPT: %t); Verify RPC damaged=%v; savepointd verify exit %d listing %d of them; other sessions keep working\n",
		t.Name(), what, w.h.tally.acked.Load()-20, lost, torn, unread, len(answered) > 0, damaged, code, listed)
	if torn > 0 || lost > 0 {
		t.Errorf("savepointd opened a damaged store and served wrong or silently missing data (lost=%d torn=%d)", lost, torn)
	}
	if len(damaged) > 0 && (code != 4 || listed != len(damaged)) {
		t.Errorf("savepointd verify exited %d listing %d of %d damaged sessions:\n%s%s", code, listed, len(damaged), out, errOut)
	}
	if lost+torn+unread == 0 {
		t.Logf("the damage did not affect any acknowledged write")
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// verifyRPC calls Verify and returns the damaged sessions' ids.
func verifyRPC(t *testing.T, p *proc) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vr, err := p.client.Verify(ctx, &savepointv1.VerifyRequest{})
	if err != nil {
		t.Errorf("Verify RPC: %v", err)
		return nil
	}
	var ids []string
	for _, d := range vr.DamagedSessions {
		ids = append(ids, d.SessionId)
		t.Logf("Verify RPC: damaged %q: %s", d.SessionId, d.Problem)
	}
	slices.Sort(ids)
	return ids
}

// dataLoss reports an answer of DATA_LOSS CHECKPOINT_CORRUPT.
func dataLoss(err error) bool {
	return status.Code(err) == codes.DataLoss && strings.Contains(reason(err), "CHECKPOINT_CORRUPT")
}
