package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// logRecord is a record the log replayed.
type logRecord struct {
	lsn     uint64
	payload []byte
}

// openLogT opens the log in dir as Open does, collecting the records after
// the mark instead of applying them to Badger, and makes the new epoch
// durable with the mark left where it was (as if Badger were never synced).
func openLogT(t *testing.T, dir string, key []byte) (*Log, []logRecord, Opened) {
	t.Helper()
	var got []logRecord
	w, res, err := Open(dir, key, 0, func(lsn uint64, p []byte) error {
		got = append(got, logRecord{lsn, slices.Clone(p)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMark(res.Mark); err != nil {
		t.Fatal(err)
	}
	return w, got, res
}

// testPayload is a payload of n bytes and more, told apart by i.
func testPayload(i int, n int) []byte {
	return append([]byte(fmt.Sprintf("k%06d", i)), bytes.Repeat([]byte{byte(i)}, n)...)
}

func appendT(t *testing.T, w *Log, p []byte) Pos {
	t.Helper()
	pos, err := w.Append(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	return pos
}

func lsns(rs []logRecord) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.lsn)
	}
	return out
}

func setSegmentSize(t *testing.T, n int64) {
	old := SegmentSize
	SegmentSize = n
	t.Cleanup(func() { SegmentSize = old })
}

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

// TestWALTornTailCut: a record whose CRC fails ends the log at Open, the
// whole record after it is not taken either, both are zeroed, and writing
// goes on at the cut with the LSNs that follow the last good record.
func TestWALTornTailCut(t *testing.T) {
	dir := t.TempDir()
	w, got, _ := openLogT(t, dir, nil)
	if len(got) != 0 {
		t.Fatalf("a new log replayed %v", lsns(got))
	}
	var ends []Pos
	for i := 1; i <= 5; i++ {
		ends = append(ends, appendT(t, w, testPayload(i, 100)))
	}
	w.Close()
	seg := filepath.Join(dir, SegmentName(1))
	patchFile(t, seg, ends[2].off+walHeaderLen+20, []byte{0xff}) // inside record 4's payload

	w, got, res := openLogT(t, dir, nil)
	if !slices.Equal(lsns(got), []uint64{1, 2, 3}) || res.End != ends[2] || !res.Cut {
		t.Fatalf("after tearing record 4: replayed %v, end %+v (want %+v), cut %t; want 1-3, the end of 3, cut",
			lsns(got), res.End, ends[2], res.Cut)
	}
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if tail := data[ends[2].off:ends[4].off]; bytes.Count(tail, []byte{0}) != len(tail) {
		t.Fatalf("records 4 (torn) and 5 (past it) were left in the segment")
	}
	appendT(t, w, testPayload(40, 30))
	appendT(t, w, testPayload(50, 30))
	w.Close()
	_, got, _ = openLogT(t, dir, nil)
	if !slices.Equal(lsns(got), []uint64{1, 2, 3, 4, 5}) || !bytes.Equal(got[3].payload, testPayload(40, 30)) ||
		!bytes.Equal(got[4].payload, testPayload(50, 30)) {
		t.Fatalf("after writing on: replayed %v, want 1-5 with the new 4 and 5", lsns(got))
	}
}

// TestWALStaleRecordsOfARecycledSegmentAreIgnored: a recycled segment
// keeps its old records, each with a good CRC; the one right after the
// last new record is at exactly the place a next record would be, and its
// LSN alone, from before, ends the log there.
func TestWALStaleRecordsOfARecycledSegmentAreIgnored(t *testing.T) {
	setSegmentSize(t, 64<<10)
	dir := t.TempDir()
	w, _, _ := openLogT(t, dir, nil)
	var ends []Pos
	for i := 1; i <= 200; i++ {
		ends = append(ends, appendT(t, w, testPayload(i, 1000)))
	}
	mark := ends[149] // record 150
	if err := w.WriteMark(mark); err != nil {
		t.Fatal(err)
	}
	if err := w.Recycle(mark.seg); err != nil {
		t.Fatal(err)
	}
	if w.recycled == 0 {
		t.Fatalf("no segment before the mark's (%d) was recycled", mark.seg)
	}
	startSeg := w.segNo
	last := uint64(200)
	for w.segNo == startSeg {
		appendT(t, w, testPayload(int(last+1), 1000))
		last++
	}
	for range 2 {
		appendT(t, w, testPayload(int(last+1), 1000))
		last++
	}
	w.Close() // a crash: the mark stays at 150

	sc := &walScanner{dir: dir}
	var seen []uint64
	if _, _, err := sc.scan(mark, func(lsn uint64, _ []byte) error { seen = append(seen, lsn); return nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sc.why, "earlier use") {
		t.Fatalf("the log ended with %q; want it to end at a stale record of the recycled segment", sc.why)
	}
	_, got, _ := openLogT(t, dir, nil)
	want := []uint64{}
	for l := mark.lsn + 1; l <= last; l++ {
		want = append(want, l)
	}
	if !slices.Equal(lsns(got), want) {
		t.Fatalf("replayed %d records, %v..., want %d..%d", len(got), lsns(got)[:min(5, len(got))], mark.lsn+1, last)
	}
}

// TestWALRecyclesOnlyBelowTheMark: full segments stay until the mark has
// passed them; then those wholly before the mark's segment are recycled and
// the mark's own is kept, so that a crash still replays from the mark.
func TestWALRecyclesOnlyBelowTheMark(t *testing.T) {
	setSegmentSize(t, 64<<10)
	dir := t.TempDir()
	w, _, _ := openLogT(t, dir, nil)
	var ends []Pos
	for i := 1; i <= 200; i++ {
		ends = append(ends, appendT(t, w, testPayload(i, 1000)))
	}
	segs := func() []uint64 {
		f, err := List(dir)
		if err != nil {
			t.Fatal(err)
		}
		return f.Segs
	}
	before := segs()
	if len(before) < 4 {
		t.Fatalf("200 records of 1 KiB made segments %v; want at least 4", before)
	}
	if err := w.Recycle(1); err != nil { // the mark is still at the start
		t.Fatal(err)
	}
	if !slices.Equal(segs(), before) || w.recycled != 0 {
		t.Fatalf("segments %v became %v with the mark at the start", before, segs())
	}
	mark := ends[99]
	if err := w.WriteMark(mark); err != nil {
		t.Fatal(err)
	}
	if err := w.Recycle(mark.seg); err != nil {
		t.Fatal(err)
	}
	after := segs()
	if after[0] != mark.seg || after[len(after)-1] != before[len(before)-1] {
		t.Fatalf("with the mark in segment %d, segments %v became %v; want those from %d on", mark.seg, before, after, mark.seg)
	}
	w.Close()
	_, got, _ := openLogT(t, dir, nil)
	if len(got) != 100 || got[0].lsn != 101 || got[99].lsn != 200 {
		t.Fatalf("replayed %d records from %v; want 101-200", len(got), lsns(got)[:min(3, len(got))])
	}
}

// TestWALNoncesNeverRepeat: with a key a record is sealed with the nonce
// (epoch, LSN). The same LSN written again at the same place after a torn
// tail was cut, with the same plaintext, must not give the same ciphertext
// (it would, with a nonce from the LSN alone, or from segment and offset);
// neither may another log under the same key (its salt differs). The
// plaintext is not in the file, and the log does not open without the key.
func TestWALNoncesNeverRepeat(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	plain := testPayload(1, 200)
	record := func(dir string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, SegmentName(1)))
		if err != nil {
			t.Fatal(err)
		}
		h := readWALHeader(data)
		return slices.Clone(data[:walHeaderLen+int(h.length)])
	}
	dir := t.TempDir()
	w, _, _ := openLogT(t, dir, key)
	appendT(t, w, plain)
	w.Close()
	first := record(dir)
	if bytes.Contains(first, plain[16:]) {
		t.Fatal("the plaintext is in the log")
	}
	patchFile(t, filepath.Join(dir, SegmentName(1)), walHeaderLen+5, []byte{first[walHeaderLen+5] ^ 1}) // torn
	w, got, _ := openLogT(t, dir, key)
	if len(got) != 0 {
		t.Fatalf("the torn record was replayed")
	}
	appendT(t, w, plain) // LSN 1 again, at the same place
	w.Close()
	again := record(dir)
	if readWALHeader(again).lsn != 1 {
		t.Fatalf("the record written again has LSN %d", readWALHeader(again).lsn)
	}
	body := func(rec []byte) []byte { return rec[walHeaderLen : len(rec)-16] } // the ciphertext without GCM's tag
	if bytes.Equal(body(first), body(again)) {
		t.Fatal("LSN 1 written again at the same place with the same plaintext gave the same ciphertext: the nonce repeated")
	}
	_, got, _ = openLogT(t, dir, key)
	if len(got) != 1 || !bytes.Equal(got[0].payload, plain) {
		t.Fatalf("the record written again does not read back")
	}

	other := t.TempDir()
	w, _, _ = openLogT(t, other, key)
	appendT(t, w, plain)
	w.Close()
	if bytes.Equal(body(record(other)), body(first)) {
		t.Fatal("two logs under one key sealed the same record alike")
	}
	if _, _, err := Open(dir, nil, 0, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrDamaged) {
		t.Fatalf("an encrypted log opened without its key: %v", err)
	}
}

// TestWALBigRecordGetsItsOwnSegment: a record larger than a segment goes
// to a segment of its own size and reads back.
func TestWALBigRecordGetsItsOwnSegment(t *testing.T) {
	setSegmentSize(t, 64<<10)
	dir := t.TempDir()
	w, _, _ := openLogT(t, dir, nil)
	appendT(t, w, testPayload(1, 10))
	big := testPayload(2, 200<<10)
	appendT(t, w, big)
	appendT(t, w, testPayload(3, 10))
	w.Close()
	_, got, _ := openLogT(t, dir, nil)
	if !slices.Equal(lsns(got), []uint64{1, 2, 3}) || !bytes.Equal(got[1].payload, big) {
		t.Fatalf("replayed %v", lsns(got))
	}
}
