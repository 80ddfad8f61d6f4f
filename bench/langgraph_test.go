package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestParseLangGraph(t *testing.T) {
	const good = `{"tables": [{"title": "T", "header": ["saver", "p50 ms"], "rows": [["SavepointSaver", "1.0"], ["AsyncSqliteSaver", "2.0"]], "notes": ["n"]}],` +
		` "summary": {"langgraph_put_get_p50_vs_sqlite": 0.5, "langgraph_16proc_vs_sqlite": 2.5, "langgraph_put_get_p50_stream_vs_unary": 0.9}}`
	tables, figures, err := parseLangGraph([]byte("progress\n" + good + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0].Title != "T" || len(tables[0].Rows) != 2 || tables[0].Rows[1][1] != "2.0" {
		t.Errorf("tables: %+v", tables)
	}
	if figures["langgraph_put_get_p50_vs_sqlite"] != 0.5 || figures["langgraph_16proc_vs_sqlite"] != 2.5 {
		t.Errorf("figures: %v", figures)
	}
	for _, tc := range []struct{ name, out, says string }{
		{"not json", "langgraph_16proc_vs_sqlite=1", "not the JSON report"},
		{"figure missing", `{"tables": [], "summary": {"langgraph_16proc_vs_sqlite": 1}}`, "langgraph_put_get_p50_vs_sqlite missing"},
		{"figure zero", `{"tables": [], "summary": {"langgraph_put_get_p50_vs_sqlite": 0, "langgraph_16proc_vs_sqlite": 1}}`, "not a positive number"},
		{"unknown figure", `{"tables": [], "summary": {"langgraph_put_get_p50_vs_sqlite": 1, "langgraph_16proc_vs_sqlite": 1, "langgraph_put_get_p50_stream_vs_unary": 1, "x": 1}}`, "unknown figure x"},
		{"ragged row", `{"tables": [{"title": "T", "header": ["a", "b"], "rows": [["1"]]}], "summary": {}}`, "a row of 1 cells"},
	} {
		if _, _, err := parseLangGraph([]byte(tc.out)); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.says)
		}
	}
}

func TestSummaryWriteLangGraph(t *testing.T) {
	s := fullSummary()
	var without bytes.Buffer
	if err := s.Write(&without); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(without.String(), "langgraph_") {
		t.Errorf("a run without the LangGraph savers printed their figures:\n%s", without.String())
	}
	s["langgraph_put_get_p50_vs_sqlite"], s["langgraph_16proc_vs_sqlite"] = 1.25, 0.5
	var with bytes.Buffer
	if err := s.Write(&with); err != nil {
		t.Fatal(err)
	}
	want := without.String() + "langgraph_put_get_p50_vs_sqlite=1.250\nlanggraph_16proc_vs_sqlite=0.500\n"
	if with.String() != want {
		t.Errorf("with the LangGraph figures:\n%s\nwant:\n%s", with.String(), want)
	}
}

func TestLangGraphFlagsGoTogether(t *testing.T) {
	bin := os.Args[0] // any file stands for savepointd here
	if _, err := parseFlags([]string{"-savepointd", bin, "-langgraph-python", "python3"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "go together") {
		t.Errorf("-langgraph-python without -langgraph-script: %v", err)
	}
	cfg, err := parseFlags([]string{"-savepointd", bin, "-langgraph-python", "py", "-langgraph-script", "s.py"}, &bytes.Buffer{})
	if err != nil || cfg.LangGraphPython != "py" || cfg.LangGraphScript != "s.py" {
		t.Errorf("parseFlags: %+v, %v", cfg, err)
	}
}

// TestParseLangGraphPostgres: the PostgreSQL figures (issue 21) come both
// or neither, and print after the SQLite ones.
func TestParseLangGraphPostgres(t *testing.T) {
	const base = `"langgraph_put_get_p50_vs_sqlite": 0.5, "langgraph_16proc_vs_sqlite": 2.5, "langgraph_put_get_p50_stream_vs_unary": 0.9`
	_, figures, err := parseLangGraph([]byte(`{"tables": [], "summary": {` + base +
		`, "langgraph_pg_put_get_p50_vs_postgressaver": 1.5, "langgraph_pg_16proc_vs_postgressaver": 1.25}}`))
	if err != nil {
		t.Fatal(err)
	}
	if figures["langgraph_pg_put_get_p50_vs_postgressaver"] != 1.5 || figures["langgraph_pg_16proc_vs_postgressaver"] != 1.25 {
		t.Errorf("figures: %v", figures)
	}
	if _, _, err := parseLangGraph([]byte(`{"tables": [], "summary": {` + base + `, "langgraph_pg_16proc_vs_postgressaver": 1}}`)); err == nil ||
		!strings.Contains(err.Error(), "langgraph_pg_put_get_p50_vs_postgressaver missing") {
		t.Errorf("one PostgreSQL figure without the other: %v", err)
	}
	s := fullSummary()
	for k, v := range figures {
		s[k] = v
	}
	s["postgres_save_p50_vs_sql"] = 3
	var out bytes.Buffer
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	tail := strings.Join(lines[len(SummaryNames):], " ")
	want := "postgres_save_p50_vs_sql=3.000 langgraph_put_get_p50_vs_sqlite=0.500 langgraph_16proc_vs_sqlite=2.500 langgraph_put_get_p50_stream_vs_unary=0.900 " +
		"langgraph_pg_put_get_p50_vs_postgressaver=1.500 langgraph_pg_16proc_vs_postgressaver=1.250"
	if tail != want {
		t.Errorf("closing lines after issue 9's: %s\nwant %s", tail, want)
	}
}
