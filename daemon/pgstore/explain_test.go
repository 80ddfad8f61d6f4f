package pgstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestExplainSaves runs the statements of saves with PostgreSQL's
// auto_explain logging EXPLAIN (ANALYZE, BUFFERS) of every statement, for
// one session's save and for a group commit of 64 sessions' saves, each
// into sessions that already hold 50 revisions. It prints each distinct
// statement once with its plan and how often it ran (go test -v -run
// TestExplainSaves ./daemon/pgstore: docs/profiles.md, "PostgreSQL saves,
// statement by statement"), and fails when a statement scans a table of
// the history (3,200 rows and more) sequentially or a save takes more
// statements than maxStatementsPerSave. The sessions table, of 64 rows
// here, may be scanned: the planner rightly prefers that for so few.
func TestExplainSaves(t *testing.T) {
	srv := pgtest.New(t)
	url := srv.URL("postgres")
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "LOAD 'auto_explain'"); err != nil { // makes its settings known
		t.Fatal(err)
	}
	for _, set := range []string{
		"session_preload_libraries = 'auto_explain'",
		"auto_explain.log_min_duration = 0",
		"auto_explain.log_analyze = on",
		"auto_explain.log_buffers = on",
		"auto_explain.log_nested_statements = on",
	} {
		if _, err := admin.Exec(ctx, "ALTER SYSTEM SET "+set); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	s := open(t, url, newSchema())
	msg := []core.Message{{Role: "user", ContentJSON: `"` + strings.Repeat("x", 2048) + `"`}}
	revs := make([]core.SaveResult, 64)
	var mu sync.Mutex
	save := func(i int) error {
		sid := fmt.Sprint("s", i)
		mu.Lock()
		r := revs[i]
		mu.Unlock()
		req := &core.SaveRequest{SessionID: sid, RequestID: fmt.Sprintf("r%d-%d", i, time.Now().UnixNano()), AppendMessages: msg}
		if r.Revision != 0 {
			req.ExpectedRevision, req.Epoch = r.Revision, r.Epoch
		}
		res, err := s.SaveCheckpoint(ctx, req)
		mu.Lock()
		revs[i] = res
		mu.Unlock()
		return err
	}
	for i := range 64 {
		for range 50 {
			if err := save(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	logPath := filepath.Join(srv.Dir, "postgres.log")
	plans := func(what string, saves int, run func() error) {
		t.Helper()
		from := fileSize(t, logPath)
		if err := run(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the log's writes
		stmts := explained(t, logPath, from)
		var out strings.Builder
		total := 0
		for _, st := range stmts {
			total += st.n
			fmt.Fprintf(&out, "\n-- ran %d times\n%s\n", st.n, st.plan)
			if m := seqScan.FindString(st.plan); m != "" {
				t.Errorf("%s: %q in the plan of\n%s", what, m, st.plan)
			}
		}
		t.Logf("%s: %d statements for %d saves, %d distinct:%s", what, total, saves, len(stmts), out.String())
		if total > maxStatementsPerSave*saves {
			t.Errorf("%s: %d statements for %d saves, over %d a save", what, total, saves, maxStatementsPerSave)
		}
	}
	plans("one session's save", 1, func() error { return save(0) })
	plans("64 sessions' saves at once", 64, func() error {
		var wg sync.WaitGroup
		errs := make([]error, 64)
		for i := range 64 {
			wg.Go(func() { errs[i] = save(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// maxStatementsPerSave bounds the statements auto_explain logs for one
// session's save alone (BEGIN and COMMIT, utility statements, are not
// among them).
const maxStatementsPerSave = 8

// seqScan matches a sequential scan of a table of the history in a plan.
var seqScan = regexp.MustCompile(`Seq Scan on \S*(revisions|messages|requests)\b`)

type explainedStatement struct {
	plan string // the query text and its plan, as auto_explain logs them
	n    int    // how often the statement ran
	rows int    // the most rows a node of the plan shown took
}

var actualRows = regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+ rows=([0-9]+)`)

// maxRows returns the most rows any node of a plan's lines took.
func maxRows(lines []string) int {
	most := 0
	for _, l := range lines {
		if m := actualRows.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			most = max(most, n)
		}
	}
	return most
}

// explained returns the statements auto_explain logged in the server log
// at path after offset from, each once (the plan of its run over the most
// rows: a group commit's largest), in the order each first ran. Parameters
// and timings differ from run to run; a statement is its query text.
func explained(t *testing.T, path string, from int64) []explainedStatement {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	byText := map[string]*explainedStatement{}
	lines := strings.Split(string(b[from:]), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], "LOG:  duration:") || !strings.HasSuffix(lines[i], "plan:") {
			continue
		}
		var entry []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
			i++
			entry = append(entry, strings.TrimPrefix(lines[i], "\t"))
		}
		if len(entry) == 0 || !strings.HasPrefix(entry[0], "Query Text:") {
			continue
		}
		// The query text runs until the plan's first node.
		k := 1
		for k < len(entry) && !planNode.MatchString(entry[k]) {
			k++
		}
		text := strings.Join(entry[:k], "\n")
		st := byText[text]
		if st == nil {
			st = &explainedStatement{}
			byText[text] = st
			order = append(order, text)
		}
		st.n++
		if r := maxRows(entry); st.plan == "" || r > st.rows {
			st.plan, st.rows = strings.Join(entry, "\n"), r
		}
	}
	out := make([]explainedStatement, len(order))
	for i, text := range order {
		out[i] = *byText[text]
	}
	return out
}

// planNode matches the first line of a plan: a node with its cost.
var planNode = regexp.MustCompile(`\(cost=[0-9.]+\.\.[0-9.]+ rows=`)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
