package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os/exec"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// LangGraphSummaryNames are the closing figures of the LangGraph savers'
// benchmark (issue 13), printed after SummaryNames when it ran. A ratio is
// SavepointSaver's figure over AsyncSqliteSaver's.
var LangGraphSummaryNames = []string{
	"langgraph_put_get_p50_vs_sqlite", // put + get_tuple p50, one process (below 1: SavepointSaver faster)
	"langgraph_16proc_vs_sqlite",      // put + get_tuple per second at 16 processes (above 1: SavepointSaver faster)
	// put + get_tuple p50 with the saver's calls on a CallStream over the
	// same saver with call_stream=False (below 1: the stream is faster)
	"langgraph_put_get_p50_stream_vs_unary",
}

// LangGraphPostgresSummaryNames are the closing figures of the LangGraph
// savers on PostgreSQL (issue 21), printed after LangGraphSummaryNames when
// they ran: SavepointSaver on a savepointd with --store-url over LangGraph's
// own PostgreSQL savers on the same server.
var LangGraphPostgresSummaryNames = []string{
	"langgraph_pg_put_get_p50_vs_postgressaver", // put + get_tuple p50 against AsyncPostgresSaver (below 1: SavepointSaver faster)
	"langgraph_pg_16proc_vs_postgressaver",      // put + get_tuple per second at 16 processes against PostgresSaver (above 1: SavepointSaver faster)
}

// langGraphFlags registers the flags that turn the LangGraph savers'
// benchmark on: a Python with savepoint[langgraph,test] installed and the
// script (client/python/bench/langgraph_bench.py).
func langGraphFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.LangGraphPython, "langgraph-python", cfg.LangGraphPython,
		"the Python `interpreter` that runs -langgraph-script (with savepoint[langgraph,test] installed); empty skips the LangGraph savers")
	fs.StringVar(&cfg.LangGraphScript, "langgraph-script", cfg.LangGraphScript,
		"the LangGraph savers' benchmark `script` (client/python/bench/langgraph_bench.py)")
}

func (c Config) validateLangGraph() error {
	if (c.LangGraphPython == "") != (c.LangGraphScript == "" && c.CheckpointersScript == "") {
		return errors.New("-langgraph-python and -langgraph-script (or -checkpointers-script) go together")
	}
	return nil
}

// LangGraph runs the LangGraph savers' benchmark, SavepointSaver against
// AsyncSqliteSaver (its -quick form in a quick run), against cfg.Savepointd,
// and adds its tables and closing figures to the run's.
//
// With cfg.Postgres it also starts a PostgreSQL server (fsync on) with a
// database for savepointd --store-url and one for LangGraph's PostgreSQL
// savers, and the script compares them as well.
func (b *Bench) LangGraph(ctx context.Context, quick bool) error {
	args := []string{b.cfg.LangGraphScript, "--json", "--savepointd", b.cfg.Savepointd}
	if quick {
		args = append(args, "--quick")
	}
	if b.cfg.Postgres {
		srv, err := pgtest.StartDurable()
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer srv.Remove()
		pg := &pgServer{url: func(db string) string { return srv.URL(db) }}
		for _, db := range []string{"savepointd", "langgraph"} {
			if err := pg.createDatabase(ctx, db); err != nil {
				return err
			}
		}
		args = append(args, "--postgres-url", srv.URL("langgraph"), "--postgres-store-url", srv.URL("savepointd"))
	}
	cmd := exec.CommandContext(ctx, b.cfg.LangGraphPython, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", b.cfg.LangGraphScript, err, stderr.String())
	}
	tables, figures, err := parseLangGraph(out)
	if err != nil {
		return fmt.Errorf("%s: %w", b.cfg.LangGraphScript, err)
	}
	if _, ok := figures[LangGraphPostgresSummaryNames[0]]; b.cfg.Postgres && !ok {
		return fmt.Errorf("%s: no PostgreSQL figures, though PostgreSQL was given", b.cfg.LangGraphScript)
	}
	b.tables = append(b.tables, tables...)
	for name, v := range figures {
		b.summary[name] = v
	}
	return nil
}

// parseLangGraph reads the script's --json output: its last line is one
// object with the tables and every LangGraphSummaryNames figure.
func parseLangGraph(out []byte) ([]*Table, Summary, error) {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var got struct {
		Tables []struct {
			Title  string     `json:"title"`
			Header []string   `json:"header"`
			Rows   [][]string `json:"rows"`
			Notes  []string   `json:"notes"`
		} `json:"tables"`
		Summary map[string]float64 `json:"summary"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &got); err != nil {
		return nil, nil, fmt.Errorf("its last line is not the JSON report: %w", err)
	}
	var tables []*Table
	for _, t := range got.Tables {
		tab := &Table{Title: t.Title, Header: t.Header, Notes: t.Notes}
		for _, r := range t.Rows {
			if len(r) != len(t.Header) {
				return nil, nil, fmt.Errorf("table %q: a row of %d cells under %d columns", t.Title, len(r), len(t.Header))
			}
			tab.Rows = append(tab.Rows, r)
		}
		tables = append(tables, tab)
	}
	figures := Summary{}
	// The PostgreSQL figures come together or not at all.
	_, pg := got.Summary[LangGraphPostgresSummaryNames[0]]
	if _, pg1 := got.Summary[LangGraphPostgresSummaryNames[1]]; pg1 {
		pg = true
	}
	want := LangGraphSummaryNames
	if pg {
		want = append(slices.Clone(want), LangGraphPostgresSummaryNames...)
	}
	for _, name := range want {
		v, ok := got.Summary[name]
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return nil, nil, fmt.Errorf("figure %s missing or not a positive number", name)
		}
		figures[name] = v
	}
	for name := range got.Summary {
		if !slices.Contains(want, name) {
			return nil, nil, fmt.Errorf("unknown figure %s", name)
		}
	}
	return tables, figures, nil
}
