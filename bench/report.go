package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Table is one scenario's figures as printed: a title, a header row, rows
// and notes saying how each figure was taken.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Add appends a row of one cell per header column; cells are formatted
// with %v, floats by num.
func (t *Table) Add(cells ...any) {
	if len(cells) != len(t.Header) {
		panic(fmt.Sprintf("table %q: a row of %d cells under %d columns", t.Title, len(cells), len(t.Header)))
	}
	row := make([]string, len(cells))
	for i, c := range cells {
		switch v := c.(type) {
		case float64:
			row[i] = num(v)
		case string:
			row[i] = v
		default:
			row[i] = fmt.Sprint(v)
		}
	}
	t.Rows = append(t.Rows, row)
}

// Print writes t as a Markdown table, so a run's output pastes into
// docs/benchmarks.md as it is.
func (t *Table) Print(w io.Writer) {
	fmt.Fprintf(w, "\n### %s\n\n", t.Title)
	widths := make([]int, len(t.Header))
	for i, h := range t.Header {
		widths[i] = len(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], len(c))
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %-*s |", widths[i], c)
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.Header)
	sep := make([]string, len(widths))
	for i, n := range widths {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range t.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

// num formats a figure with three significant digits, at least, and no
// exponent: 0.123, 1.23, 12.3, 1234.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "NaN"
	case a >= 100 || v == 0:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// SummaryNames are the figures of the closing name=value lines, in order,
// named as issue 9 names them. A ratio is the first system's figure over
// the second's.
var SummaryNames = []string{
	"save_p50_vs_fsync",          // savepointd SaveCheckpoint p50 / write+fdatasync p50 (scenario 1)
	"save_p50_vs_badger",         // savepointd SaveCheckpoint p50 / Badger SyncWrites txn p50 (scenario 1)
	"throughput64_vs_1",          // savepointd saves/s, 64 sessions / 1 session (scenario 2)
	"throughput64_vs_sqlite",     // savepointd / SQLite WAL saves/s at 64 (scenario 2)
	"throughput64_vs_badger",     // savepointd / Badger txn saves/s at 64 (scenario 2)
	"growth_2000_vs_10",          // savepointd save p50 at turn 2,000 / turn 10 (scenario 3)
	"resume_20mib_ms",            // Resume and paging through 10,000 messages (scenario 4)
	"rss_idle_mib",               // VmRSS after start (scenario 5)
	"rss_peak_anon_mib",          // peak RssAnon under scenario 2 (scenario 5)
	"startup_100k_ms",            // start to SERVING with 100,000 sessions (scenario 5)
	"cpu_us_per_save",            // savepointd utime+stime per save at 64 sessions (scenario 6)
	"cpu_save_vs_empty_rpc",      // savepointd CPU per save / its CPU per empty RPC, 64 sessions (scenario 6, issue 22)
	"save_p50_vs_floor",          // savepointd save p50 / (empty RPC p50 + write+fdatasync p50) (scenario 1, issue 38)
	"save_p50_vs_sequence_floor", // savepointd save p50 / the p50 of an empty RPC then a write+fdatasync, timed together (scenario 1)
	"sequence_floor_vs_floor",    // that sequence's p50 / (empty RPC p50 + write+fdatasync p50) (scenario 1)
	"throughput1_vs_sqlite",      // savepointd / SQLite WAL saves/s at 1 session (scenario 2, issue 38)
	"cpu_save_vs_floor",          // savepointd CPU per save / (its CPU per empty RPC + the store's in process), 64 sessions (scenario 6, issue 38)
}

// Summary holds the closing figures by name.
type Summary map[string]float64

// Write prints one name=value line per SummaryNames entry, in that order,
// then one per PostgresSummaryNames, LangGraphSummaryNames,
// LangGraphPostgresSummaryNames and InspectorSummaryNames figure s holds, and returns an error
// naming every SummaryNames figure that is missing or not a number (each
// printed as NaN), so a run that lost a figure fails.
func (s Summary) Write(w io.Writer) error {
	var missing []string
	for _, name := range SummaryNames {
		v, ok := s[name]
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			missing = append(missing, name)
			v = math.NaN()
		}
		fmt.Fprintf(w, "%s=%s\n", name, strconv.FormatFloat(v, 'f', 3, 64))
	}
	later := append(append(append(slices.Clone(PostgresSummaryNames), LangGraphSummaryNames...), LangGraphPostgresSummaryNames...), InspectorSummaryNames...)
	for _, name := range later { // only when they ran
		if v, ok := s[name]; ok {
			fmt.Fprintf(w, "%s=%s\n", name, strconv.FormatFloat(v, 'f', 3, 64))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("figures not measured: %s", strings.Join(missing, ", "))
	}
	return nil
}
