package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestParseLangGraph(t *testing.T) {
	const good = `{"tables": [{"title": "T", "header": ["saver", "p50 ms"], "rows": [["SavepointSaver", "1.0"], ["AsyncSqliteSaver", "2.0"]], "notes": ["n"]}],` +
		` "summary": {"langgraph_put_get_p50_vs_sqlite": 0.5, "langgraph_16proc_vs_sqlite": 2.5}}`
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
		{"unknown figure", `{"tables": [], "summary": {"langgraph_put_get_p50_vs_sqlite": 1, "langgraph_16proc_vs_sqlite": 1, "x": 1}}`, "unknown figure x"},
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
