package testprogress

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRunGolden feeds a real `go test -json` stream (testdata/stream.jsonl:
// a package with a passing, a failing and a skipped test, a passing one, one
// without test files, one that does not build) and compares the progress
// with testdata/stream.golden.
func TestRunGolden(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "stream.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	sum, err := Run(in, &out, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "stream.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("progress differs from %s (run with -update to accept):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
	if sum.OK() {
		t.Errorf("Summary %+v: OK, want a failure (TestFail and the broken package)", sum)
	}
	if sum.Passed != 2 || sum.Failed != 1 || sum.Skipped != 1 {
		t.Errorf("Summary %+v: want 2 passed, 1 failed, 1 skipped", sum)
	}
}

func TestRunning(t *testing.T) {
	clock := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	f := New(&out, func() time.Time { return clock })
	f.Running()
	if out.Len() != 0 {
		t.Fatalf("Running with nothing started wrote %q", out.String())
	}
	f.Line(`{"Action":"start","Package":"p/slow"}`)
	clock = clock.Add(30 * time.Second)
	f.Line(`{"Action":"start","Package":"p/fast"}`)
	clock = clock.Add(90 * time.Second)
	out.Reset()
	f.Running()
	if want := "running p/slow (2m0s), p/fast (1m30s)\n"; out.String() != want {
		t.Errorf("Running wrote %q, want %q", out.String(), want)
	}
	f.Line(`{"Action":"pass","Package":"p/slow","Elapsed":120}`)
	out.Reset()
	f.Running()
	if !strings.Contains(out.String(), "p/fast") || strings.Contains(out.String(), "p/slow") {
		t.Errorf("after p/slow passed, Running wrote %q", out.String())
	}
}

func TestLineNotJSON(t *testing.T) {
	var out bytes.Buffer
	f := New(&out, nil)
	f.Line("# example.com/broken")
	f.Line("{not json")
	if want := "# example.com/broken\n{not json\n"; out.String() != want {
		t.Errorf("wrote %q, want the lines unchanged %q", out.String(), want)
	}
}
