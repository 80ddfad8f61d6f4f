package main

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, got)
	}
}

func fullSummary() Summary {
	s := Summary{}
	for i, name := range SummaryNames {
		s[name] = float64(i) + 0.25
	}
	return s
}

func TestSummaryWrite(t *testing.T) {
	var out bytes.Buffer
	if err := fullSummary().Write(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden", out.Bytes())

	// Every line is name=value with a name of issue 9, in its order.
	line := regexp.MustCompile(`^([a-z0-9_]+)=(-?[0-9]+\.[0-9]{3})$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(SummaryNames) {
		t.Fatalf("%d lines, want %d", len(lines), len(SummaryNames))
	}
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] != SummaryNames[i] {
			t.Errorf("line %d %q: want %s=<number>", i, l, SummaryNames[i])
		}
	}
}

// TestSummaryNames pins the names to issue 9's list, which other tools read,
// and issue 38's beside them.
func TestSummaryNames(t *testing.T) {
	want := "save_p50_vs_fsync save_p50_vs_badger throughput64_vs_1 throughput64_vs_sqlite throughput64_vs_badger " +
		"growth_2000_vs_10 resume_20mib_ms rss_idle_mib rss_peak_anon_mib startup_100k_ms cpu_us_per_save cpu_save_vs_empty_rpc " +
		"save_p50_vs_floor save_p50_vs_sequence_floor sequence_floor_vs_floor throughput1_vs_sqlite cpu_save_vs_floor"
	if got := strings.Join(SummaryNames, " "); got != want {
		t.Errorf("SummaryNames = %s\nwant           %s", got, want)
	}
}

func TestSummaryMissing(t *testing.T) {
	s := fullSummary()
	delete(s, "rss_idle_mib")
	s["cpu_us_per_save"] = math.NaN()
	var out bytes.Buffer
	err := s.Write(&out)
	if err == nil || !strings.Contains(err.Error(), "rss_idle_mib, cpu_us_per_save") {
		t.Errorf("Write: error %v, want one naming rss_idle_mib and cpu_us_per_save", err)
	}
	if !strings.Contains(out.String(), "rss_idle_mib=NaN\n") || !strings.Contains(out.String(), "cpu_us_per_save=NaN\n") {
		t.Errorf("missing figures not printed as NaN:\n%s", out.String())
	}
}

func TestTablePrint(t *testing.T) {
	tb := &Table{Title: "1. Example", Header: []string{"system", "p50 ms", "ratio"}, Notes: []string{"a note"}}
	tb.Add("savepointd", 0.4567, 2.0)
	tb.Add("write+fdatasync", 0.2, math.NaN())
	tb.Add("big", 12345.6, 10)
	var out bytes.Buffer
	tb.Print(&out)
	golden(t, "table.golden", out.Bytes())
}

func TestNum(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.01234, "0.0123"}, {1.234, "1.23"}, {12.34, "12.3"}, {123.4, "123"}, {4950.6, "4951"}, {math.Inf(1), "NaN"}} {
		if got := num(tc.v); got != tc.want {
			t.Errorf("num(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "savepointd")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-savepointd", bin, "-reps", "2", "-quick", "-sessions", "1,64"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	q := QuickConfig()
	if cfg.Reps != 2 || cfg.Window != q.Window || cfg.Cycles != q.Cycles || len(cfg.Sessions) != 2 {
		t.Errorf("-quick with -reps 2: %+v; want the quick settings with 2 repetitions", cfg)
	}
	if cfg, _ := parseFlags([]string{"-savepointd", bin}, &stderr); cfg.Window != 5*time.Second || cfg.Savepoint != "" {
		t.Errorf("full run window %v, savepoint %q; want 5s and no inspector", cfg.Window, cfg.Savepoint)
	}
	if cfg, err := parseFlags([]string{"-savepointd", bin, "-savepoint", bin}, &stderr); err != nil || cfg.Savepoint != bin {
		t.Errorf("-savepoint %s: %q, %v", bin, cfg.Savepoint, err)
	}
	if cfg, _ := parseFlags([]string{"--quick=true", "-savepointd", bin}, &stderr); cfg.Window != q.Window {
		t.Errorf("--quick=true: window %v, want the quick %v", cfg.Window, q.Window)
	}
	for _, args := range [][]string{
		{"-savepointd", bin, "-sessions", "1,8"},
		{"-savepointd", bin, "-sessions", "8,64"}, // throughput1_vs_sqlite needs 1
		{"-savepointd", bin, "-scenarios", "7"},
		{"-savepointd", bin, "-reps", "0"},
		{"-savepointd", filepath.Join(t.TempDir(), "none")},
		{"-savepointd", bin, "-savepoint", filepath.Join(t.TempDir(), "none")},
		{"-savepointd", bin, "extra"},
	} {
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

// TestSummaryPostgres: the PostgreSQL figures follow issue 9's, in their
// order, when they ran, and before the LangGraph ones.
func TestSummaryPostgres(t *testing.T) {
	s := fullSummary()
	s["postgres_throughput64_vs_sql"] = 0.5
	s["postgres_save_p50_vs_sql"] = 1.25
	s["langgraph_16proc_vs_sqlite"] = 2
	var out bytes.Buffer
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	tail := strings.Join(lines[len(SummaryNames):], " ")
	if want := "postgres_save_p50_vs_sql=1.250 postgres_throughput64_vs_sql=0.500 langgraph_16proc_vs_sqlite=2.000"; tail != want {
		t.Errorf("after issue 9's figures: %s\nwant %s", tail, want)
	}
}
