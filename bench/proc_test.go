package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "proc", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStatus(t *testing.T) {
	got, err := parseStatus(readTestdata(t, "status"))
	if err != nil {
		t.Fatal(err)
	}
	want := Memory{RSS: 201728 << 10, Anon: 154624 << 10, File: 47104 << 10, HWM: 250112 << 10}
	if got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
}

func TestParseStatusErrors(t *testing.T) {
	full := string(readTestdata(t, "status"))
	for _, tc := range []struct{ name, in, want string }{
		{"no RssAnon (old kernel)", strings.Replace(full, "RssAnon:", "Rss_Anon:", 1), "no RssAnon line"},
		{"not kB", strings.Replace(full, "  201728 kB", "  201728 MB", 1), `VmRSS: "201728 MB" is not in kB`},
		{"not a number", strings.Replace(full, "  47104 kB", "  47x04 kB", 1), "RssFile"},
		{"empty", "", "no "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseStatus([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseStatus: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseSmapsRollup(t *testing.T) {
	got, err := parseSmapsRollup(readTestdata(t, "smaps_rollup"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Rollup{RSS: 201728 << 10, Anonymous: 154624 << 10}); got != want {
		t.Errorf("parseSmapsRollup = %+v, want %+v", got, want)
	}
	// Pss_Anon must not be taken for Anonymous, nor Pss for Rss.
	if got.FileBacked() != 47104<<10 {
		t.Errorf("FileBacked = %d, want %d", got.FileBacked(), 47104<<10)
	}
	if _, err := parseSmapsRollup([]byte("Rss: 10 kB\n")); err == nil {
		t.Error("a rollup without Anonymous parsed")
	}
}

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		file string
		want time.Duration
	}{
		{"stat", (1234 + 567) * 10 * time.Millisecond},
		{"stat_paren", (7 + 3) * 10 * time.Millisecond}, // "(sp (x) d)": counted from the last ')'
	} {
		got, err := parseStatCPU(readTestdata(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if got != tc.want {
			t.Errorf("%s: parseStatCPU = %v, want %v", tc.file, got, tc.want)
		}
	}
	for _, bad := range []string{"", "4242 savepointd S 1", "4242 (savepointd) S 1 2 3", "4242 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 3 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseIOWriteBytes(t *testing.T) {
	got, err := parseIOWriteBytes(readTestdata(t, "io"))
	if err != nil || got != 28672 {
		t.Errorf("parseIOWriteBytes = %d, %v; want 28672", got, err)
	}
	if _, err := parseIOWriteBytes([]byte("rchar: 1\n")); err == nil {
		t.Error("io without write_bytes parsed")
	}
}

// TestProcSelf reads this process's own figures, as the benchmark reads
// savepointd's: the live files must parse too.
func TestProcSelf(t *testing.T) {
	p := Proc{PID: os.Getpid()}
	m, err := p.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Anon <= 0 || m.Anon+m.File > m.RSS+(1<<20) {
		t.Errorf("Memory = %+v: want RSS > 0 and anonymous + file about RSS", m)
	}
	if _, err := p.Rollup(); err != nil {
		t.Error(err)
	}
	busy := time.Now()
	for time.Since(busy) < 30*time.Millisecond {
	}
	if cpu, err := p.CPU(); err != nil || cpu <= 0 {
		t.Errorf("CPU = %v, %v; want some CPU time after 30 ms of spinning", cpu, err)
	}
	if _, err := (Proc{}).WriteBytes(); err != nil {
		t.Error(err)
	}
}

func TestParseMachineCPU(t *testing.T) {
	m, err := parseMachineCPU(readTestdata(t, "machine_stat"))
	if err != nil {
		t.Fatal(err)
	}
	// cpu  1856562 0 781238 955581 60146 0 34655 98836 0 0
	wantTotal := time.Duration(1856562+781238+955581+60146+34655+98836) * clockTick
	wantIdle := time.Duration(955581+60146) * clockTick
	if m.Total != wantTotal || m.Idle != wantIdle {
		t.Errorf("parseMachineCPU = %+v, want Total %v Idle %v", m, wantTotal, wantIdle)
	}
	later := MachineCPU{Total: m.Total + 400*clockTick, Idle: m.Idle + 100*clockTick}
	if got := later.Busy(m); got != 0.75 {
		t.Errorf("Busy = %v, want 0.75 (300 of 400 ticks not idle)", got)
	}
	if got := m.Busy(m); got != 0 {
		t.Errorf("Busy over no time = %v, want 0", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 x 5 6 7 8"} {
		if _, err := parseMachineCPU([]byte(bad)); err == nil {
			t.Errorf("parseMachineCPU(%q) succeeded", bad)
		}
	}
	if _, err := ReadMachineCPU(); err != nil {
		t.Error(err)
	}
}

func TestParseSectorsWritten(t *testing.T) {
	for _, tt := range []struct {
		stat string
		want int64
		err  bool
	}{
		{"  123 0 4000 10 456 7 8192 90 0 100 100 0 0 0 0 0 0\n", 8192 * 512, false},
		{"1 2 3 4 5 6\n", 0, true},
		{"1 2 3 4 5 6 x 8\n", 0, true},
	} {
		got, err := parseSectorsWritten([]byte(tt.stat))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("parseSectorsWritten(%q) = %d, %v; want %d, error %v", tt.stat, got, err, tt.want, tt.err)
		}
	}
}

// TestDeviceWrites: a file written and not synced is counted, because the
// count syncs the filesystem first.
func TestDeviceWrites(t *testing.T) {
	dir := t.TempDir()
	d := deviceWrites{dir}
	before, err := d.WriteBytes()
	if err != nil {
		t.Skipf("the device under %s cannot be counted here: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), bytes.Repeat([]byte{7}, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	after, err := d.WriteBytes()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 4<<20 {
		t.Errorf("the device wrote %d bytes for a 4 MiB file, want at least 4 MiB", after-before)
	}
}
