package crashtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Damaged data files. The store is written in two runs, each ended by a
// clean stop, so that Badger has flushed its memtables to tables (.sst) and
// the first run's value log (000001.vlog, holding messages over 1 MiB) is no
// longer its last one: Badger checks only the last value log at open.

func corruptionSetup(t *testing.T, seed uint64) (*proc, *worker) {
	t.Helper()
	p := newProc(t, binary(t, false))
	h := &harness{t: t, cfg: crashConfig{}, tally: newTally()}
	w := &worker{h: h, rng: rand.New(rand.NewPCG(seed, 1))}
	for run := range 2 {
		p.mustStart()
		for range 4 - 2*run {
			w.steps(t, p.client, 50)
			ctx, cancel := ctxT()
			if err := w.do(ctx, p.client, w.bigSave()); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		w.steps(t, p.client, 50)
		if code := p.stop(); code != 0 {
			t.Fatalf("clean stop: exit %d\n%s", code, p.stderr)
		}
	}
	t.Logf("%d acknowledged writes in two runs; files: %v", w.h.tally.acked.Load(), dirNames(t, p.dir))
	return p, w
}

// TestCorruptTable flips a byte in the middle of the largest table.
func TestCorruptTable(t *testing.T) {
	p, w := corruptionSetup(t, 31)
	ssts := filesWith(t, p.dir, ".sst")
	if len(ssts) == 0 {
		t.Fatal("no table after a clean stop")
	}
	file := ssts[0]
	for _, f := range ssts {
		if fileSize(t, f) > fileSize(t, file) {
			file = f
		}
	}
	off := fileSize(t, file) / 2
	flipByte(t, file, off)
	what := fmt.Sprintf("flipped byte %d of %s (%d bytes)", off, filepath.Base(file), fileSize(t, file))
	damaged(t, p, w, what)
}

// TestCorruptValue flips a byte in the middle of the first value log, inside
// a message of 1.5 MiB.
func TestCorruptValue(t *testing.T) {
	p, w := corruptionSetup(t, 32)
	file := filepath.Join(p.dir, "000001.vlog")
	used := usedBytes(t, file)
	off := used / 2
	was := flipByte(t, file, off)
	if was < 'a' || was > 'z' {
		t.Logf("note: byte %d was 0x%02x, not inside a message's padding", off, was)
	}
	damaged(t, p, w, fmt.Sprintf("flipped byte %d of 000001.vlog (%d bytes used), inside a value", off, used))
}

// TestTruncateValueLog cuts the first value log to half of its used bytes.
func TestTruncateValueLog(t *testing.T) {
	p, w := corruptionSetup(t, 33)
	file := filepath.Join(p.dir, "000001.vlog")
	used := usedBytes(t, file)
	if err := os.Truncate(file, used/2); err != nil {
		t.Fatal(err)
	}
	damaged(t, p, w, fmt.Sprintf("truncated 000001.vlog from %d used bytes to %d", used, used/2))
}

// knownTablePanic records a defect of Badger v4.9.6 that this package found:
// when a table block fails its checksum at open (ChecksumVerificationMode
// OnTableAndBlockRead), table.(*Table).VerifyChecksum reads b.offset of the
// nil block returned with the error (table/table.go:711), in a goroutine of
// newLevelsController, so savepointd and savepointd verify die of a nil
// pointer panic (exit 2, savepointd's code for a configuration error)
// instead of refusing with a message. The data is not served, so nothing
// wrong reaches a client; the tests report the panic without failing while
// this is true. Set it to false once the store avoids the panic: a panic
// then fails the test.
const knownTablePanic = false

// damaged restarts savepointd on damaged files: it must either refuse to
// open, saying what is wrong, with savepointd verify failing too, or serve
// DATA_LOSS for exactly the damaged sessions (see served).
func damaged(t *testing.T, p *proc, w *worker, what string) {
	t.Helper()
	t.Log(what)
	if err := p.start(); err == nil {
		served(t, p, w, what)
		return
	}
	code := p.exitCode()
	msg := strings.TrimSpace(p.stderr.String())
	vcode, vout, verr := runBin(p.bin, "verify", "--data-dir", p.dir)
	if code == 0 || vcode == 0 {
		t.Errorf("a refusal must exit non-zero (savepointd %d, verify %d)", code, vcode)
	}
	if strings.Contains(msg, "panic: ") {
		first := msg[strings.Index(msg, "panic: "):]
		first, _, _ = strings.Cut(first, "\n")
		frame := ""
		if i := strings.Index(msg, "badger/v4/table.(*Table).VerifyChecksum"); i >= 0 {
			frame = strings.Fields(msg[i:])[0] + " " + strings.Fields(msg[i:])[1]
		}
		fmt.Printf("%s: %s: KNOWN DEFECT: savepointd panicked at open, exit %d: %q at %s; savepointd verify exit %d (nothing was served)\n",
			t.Name(), what, code, first, frame, vcode)
		t.Logf("savepointd panicked at open:\n%s", lastLines(msg, 30))
		if !knownTablePanic {
			t.Errorf("savepointd panicked instead of refusing with a message")
		}
		return
	}
	t.Logf("savepointd refused to open: exit %d: %s", code, msg)
	t.Logf("savepointd verify: exit %d: %s%s", vcode, vout, strings.TrimSpace(verr))
	last := lastLines(msg, 1)
	fmt.Printf("%s: %s: savepointd refused to open, exit %d: %q; savepointd verify exit %d\n", t.Name(), what, code, last, vcode)
	if file := strings.Fields(what)[4]; !strings.Contains(last, file) {
		t.Errorf("the refusal does not name the damaged file %s: %s", file, last)
	}
}

// TestCorruptTableIndex flips a byte near the end of the largest table, in
// its index.
func TestCorruptTableIndex(t *testing.T) {
	p, w := corruptionSetup(t, 34)
	ssts := filesWith(t, p.dir, ".sst")
	if len(ssts) == 0 {
		t.Fatal("no table after a clean stop")
	}
	file := ssts[0]
	for _, f := range ssts {
		if fileSize(t, f) > fileSize(t, file) {
			file = f
		}
	}
	off := fileSize(t, file) - 64
	flipByte(t, file, off)
	damaged(t, p, w, fmt.Sprintf("flipped byte %d of %s (%d bytes), in its index", off, filepath.Base(file), fileSize(t, file)))
}
