package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/crash-matrix.txt from this run")

// The crash matrix: the demo killed at every crash point of every turn of
// both scripts, then resumed (and killed again during some resumes), against
// one real savepointd. Each case must finish with the uncrashed run's
// history (an is_error result exactly where a side-effecting call was in
// doubt), write the report at most once (exactly once unless in doubt),
// and answer every tool_use with exactly one tool_result.

// matrixCase is one row of the matrix.
type matrixCase struct {
	script  string
	crashes []string // CRASH_AFTER of the first run, then of each resume
	na      string   // why the crash point cannot fire, for a row that is not applicable

	// Filled in by the run.
	decisions []string // per resume, what it decided
	writes    int
	problems  []string
}

func (c *matrixCase) name() string { return c.script + "/" + strings.Join(c.crashes, "/then/") }

func (c *matrixCase) sessionID() string {
	return "m." + c.script + "." + strings.Join(c.crashes, ".then.")
}

func (c *matrixCase) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// chains are the cases in which a resume is killed too.
var chains = map[string][][]string{
	"seed": {
		{"after-save-a:3", "after-begin:3"},        // resume begins the never-begun write, dies: now in doubt
		{"after-save-a:3", "after-tool:3"},         // resume runs it, dies before the record: in doubt, written once
		{"after-save-a:3", "after-effect-write:3"}, // resume runs and records it, dies: reused
		{"after-save-a:3", "after-save-b:3"},       // resume answers it, dies after Point B: nothing pending
		{"after-tool:1", "after-tool:1"},           // a read-only tool re-run on resume, killed again
		{"after-save-b:1", "after-tool:3"},         // a resumed run goes on and is killed at a later turn
		{"after-save-a:3", "after-begin:3", "after-save-b:3"},
	},
	"parallel": {
		{"after-save-a:2", "after-effect-write:2:count_words"},
		{"after-tool:2:count_words", "after-begin:2"},
		{"after-tool:2:write_report", "after-save-b:2"},
	},
}

// matrixCases lists every label at every turn of a script: one row per
// crash point, one per tool use in a turn that names several, and a
// not-applicable row (still run, to show it does not fire) where the label
// cannot fire.
func matrixCases(script string) []*matrixCase {
	var out []*matrixCase
	add := func(crash, na string) {
		out = append(out, &matrixCase{script: script, crashes: []string{crash}, na: na})
	}
	for i, reply := range scripts[script] {
		turn := i + 1
		calls := reply.ToolUses()
		for _, label := range labels {
			spec := fmt.Sprintf("%s:%d", label, turn)
			switch {
			case label == "after-save-a":
				add(spec, "")
			case len(calls) == 0:
				add(spec, fmt.Sprintf("turn %d is the final answer: no tool runs, no Point B", turn))
			case label == "after-save-b":
				add(spec, "")
			case len(calls) == 1:
				if label == "after-begin" && calls[0].EffectClass == client.ReadOnly {
					add(spec, calls[0].Name+" is read-only: never begun")
				} else {
					add(spec, "")
				}
			default:
				for _, call := range calls {
					if label == "after-begin" && call.EffectClass == client.ReadOnly {
						add(spec+":"+call.Name, call.Name+" is read-only: never begun")
					} else {
						add(spec+":"+call.Name, "")
					}
				}
			}
		}
	}
	for _, ch := range chains[script] {
		out = append(out, &matrixCase{script: script, crashes: ch})
	}
	return out
}

// expected is what the protocol promises for a sequence of crashes.
type expected struct {
	killed    []bool     // per run
	decisions [][]string // per resume
	writes    int
	inDoubt   map[string]bool // tool use ids answered with is_error
}

// simulate plays a case on a model of the protocol: the agent loop and
// docs/protocol.md's Reconcile table (recorded: reuse; read-only: run;
// side-effecting: run if never begun, else in doubt).
func simulate(script string, crashes []string) (expected, error) {
	type call struct {
		use                  client.ToolUse
		begun, ran, recorded bool
	}
	replies := scripts[script]
	exp := expected{inDoubt: map[string]bool{}}
	var turn uint32
	var pending []*call
	finished := false
	for run := 0; ; run++ {
		if run > 10 {
			return exp, fmt.Errorf("more than 10 runs")
		}
		var p *point
		if run < len(crashes) {
			var err error
			if p, err = parsePoint(crashes[run]); err != nil {
				return exp, err
			}
		}
		hit := func(label, tool string) bool { return p.matches(label, turn, tool) }
		exec := func(c *call) bool {
			if c.use.EffectClass != client.ReadOnly {
				c.begun = true
				if hit("after-begin", c.use.Name) {
					return true
				}
			}
			c.ran = true
			if c.use.Name == "write_report" {
				exp.writes++
			}
			if hit("after-tool", c.use.Name) {
				return true
			}
			c.recorded = true
			return hit("after-effect-write", c.use.Name)
		}
		crashed := false
		if run > 0 {
			var ds []string
			if len(pending) == 0 {
				ds = append(ds, "nothing pending")
			}
			for _, c := range pending {
				switch {
				case c.recorded:
					ds = append(ds, c.use.Name+"=REUSE")
				case c.use.EffectClass == client.ReadOnly:
					ds = append(ds, c.use.Name+"=RUN(read-only)")
					crashed = exec(c)
				case !c.begun:
					ds = append(ds, c.use.Name+"=RUN(never begun)")
					crashed = exec(c)
				default:
					ds = append(ds, c.use.Name+"=IN_DOUBT")
					exp.inDoubt[c.use.ToolUseID] = true
				}
				if crashed {
					break
				}
			}
			exp.decisions = append(exp.decisions, ds)
			if !crashed && len(pending) > 0 {
				pending = nil
				crashed = hit("after-save-b", "")
			}
		}
		for !crashed && !finished {
			turn++
			calls := replies[turn-1].ToolUses()
			if len(calls) == 0 {
				finished = true
				crashed = hit("after-save-a", "")
				break
			}
			pending = nil
			for _, u := range calls {
				pending = append(pending, &call{use: u})
			}
			if crashed = hit("after-save-a", ""); crashed {
				break
			}
			for _, c := range pending {
				if crashed = exec(c); crashed {
					break
				}
			}
			if crashed {
				break
			}
			pending = nil
			crashed = hit("after-save-b", "")
		}
		exp.killed = append(exp.killed, crashed)
		if !crashed {
			return exp, nil
		}
	}
}

func TestCrashMatrix(t *testing.T) {
	start := time.Now()
	d, addr := startDaemon(t)
	demoBinary(t)

	// The uncrashed runs everything is compared with.
	base := map[string][]*savepointv1.Message{}
	for _, script := range scriptNames() {
		dir, id := workdir(t), "base."+script
		r := runDemo(t, runOpts{addr: addr, dir: dir, session: id, script: script})
		if r.code != 0 || !strings.Contains(r.stdout, "[done] "+finalAnswer+"\n") {
			t.Fatalf("uncrashed %s run: %s", script, r)
		}
		if n := writes(t, dir); n != 1 {
			t.Fatalf("uncrashed %s run wrote the report %d times", script, n)
		}
		_, base[script] = history(t, d.Client, id)
		if problems := checkPairing(t, base[script]); len(problems) > 0 {
			t.Fatalf("uncrashed %s run: %v", script, problems)
		}
	}

	var cases []*matrixCase
	for _, script := range []string{"seed", "parallel"} {
		cases = append(cases, matrixCases(script)...)
	}
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name(), func(t *testing.T) {
				t.Parallel()
				c.run(t, d.Client, addr, base[c.script])
				for _, p := range c.problems {
					t.Error(p)
				}
			})
		}
	})

	// The seed's three crash moments, as its exercise states them, checked
	// on their rows independently of the model above.
	moments := []struct {
		crash, want string
		writes      int
		why         string
	}{
		{"after-save-a:1", "read_notes=RUN(read-only)", 1, "moment 1, read-only: ledger miss, re-run"},
		{"after-save-a:3", "write_report=RUN(never begun)", 1, "moment 1, side effect: never begun, so now re-run safely"},
		{"after-tool:1", "read_notes=RUN(read-only)", 1, "moment 2, read-only: ledger miss, re-run"},
		{"after-tool:2", "count_words=RUN(read-only)", 1, "moment 2, read-only: ledger miss, re-run"},
		{"after-tool:3", "write_report=IN_DOUBT", 1, "moment 2, side effect: it ran but is not recorded, so in doubt"},
		{"after-begin:3", "write_report=IN_DOUBT", 0, "begun, not run: indistinguishable from moment 2, in doubt"},
		{"after-save-b:1", "nothing pending", 1, "moment 3: nothing pending"},
		{"after-save-b:3", "nothing pending", 1, "moment 3: nothing pending"},
		{"after-effect-write:3", "write_report=REUSE", 1, "the seed's demo: ledger hit, not re-run"},
	}
	for _, m := range moments {
		i := slices.IndexFunc(cases, func(c *matrixCase) bool {
			return c.script == "seed" && len(c.crashes) == 1 && c.crashes[0] == m.crash
		})
		if i < 0 {
			t.Errorf("no matrix row for seed %s", m.crash)
			continue
		}
		c := cases[i]
		if len(c.decisions) != 1 || c.decisions[0] != m.want || c.writes != m.writes {
			t.Errorf("seed %s (%s): decided %q with %d writes, want %q with %d", m.crash, m.why, c.decisions, c.writes, m.want, m.writes)
		}
	}

	table := matrixTable(cases)
	t.Logf("crash matrix (%d cases against one savepointd, %v):\n%s", len(cases), time.Since(start).Round(100*time.Millisecond), table)
	golden := filepath.Join("testdata", "crash-matrix.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/savepoint-demo -run TestCrashMatrix -update writes it)", err)
	}
	if string(want) != table {
		t.Errorf("the matrix differs from %s: review the table above; if the change is intended, rerun with -update", golden)
	}
}

// run plays one case against the real binaries and checks the outcome.
func (c *matrixCase) run(t *testing.T, raw savepointv1.SavepointServiceClient, addr string, base []*savepointv1.Message) {
	exp, err := simulate(c.script, c.crashes)
	if err != nil {
		t.Fatal(err)
	}
	dir, id := workdir(t), c.sessionID()
	for i, killed := range exp.killed {
		crash := ""
		if i < len(c.crashes) {
			crash = c.crashes[i]
		}
		r := runDemo(t, runOpts{addr: addr, dir: dir, session: id, script: c.script, resume: i > 0, crash: crash})
		if i > 0 {
			got := strings.Join(decisions(r.stdout), ", ")
			c.decisions = append(c.decisions, got)
			if want := strings.Join(exp.decisions[i-1], ", "); got != want {
				c.fail("run %d decided %q, want %q\n%s", i+1, got, want, r)
			}
		}
		if killed {
			if want := "[kill] simulated kill at " + crash + "\n"; r.code != 137 || !strings.HasSuffix(r.stdout, want) {
				c.fail("run %d: want it killed at %s\n%s", i+1, crash, r)
				return
			}
			continue
		}
		if r.code != 0 || !strings.HasSuffix(r.stdout, "[done] "+finalAnswer+"\n") && !strings.Contains(r.stdout, "[done] "+finalAnswer+"\n[check] ") {
			c.fail("run %d did not finish\n%s", i+1, r)
			return
		}
		if c.na != "" && (i > 0 || strings.Contains(r.stdout, "[kill]")) {
			c.fail("not applicable, yet it fired\n%s", r)
		}
	}

	c.writes = writes(t, dir)
	if c.writes != exp.writes || c.writes > 1 || (c.writes == 0 && len(exp.inDoubt) == 0) {
		c.fail("report written %d times, want %d (at most once, exactly once unless in doubt)", c.writes, exp.writes)
	}
	cp, msgs := history(t, raw, id)
	if len(cp.GetPendingToolUses()) != 0 {
		c.fail("finished with pending tool uses %v", cp.GetPendingToolUses())
	}
	if text, done := finished(clientMessages(msgs)); !done || text != finalAnswer {
		c.fail("the history does not end with the final answer")
	}
	c.problems = append(c.problems, checkPairing(t, msgs)...)
	c.problems = append(c.problems, compareHistory(t, base, msgs, exp.inDoubt)...)
}

func clientMessages(msgs []*savepointv1.Message) []client.Message {
	out := make([]client.Message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, client.Message{Role: m.GetRole(), ContentJSON: m.GetContentJson()})
	}
	return out
}

// checkPairing checks that every tool_use is answered by exactly one
// tool_result with its id, in the next message, and that no tool_result
// answers anything else.
func checkPairing(t testing.TB, msgs []*savepointv1.Message) []string {
	var problems []string
	var open []string // tool uses of the previous assistant message
	for i, m := range clientMessages(msgs) {
		var uses, results []string
		for _, b := range contentBlocks(m) {
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
			case "tool_result":
				results = append(results, b.ToolUseID)
			}
		}
		if len(open) > 0 || len(results) > 0 {
			got, want := slices.Sorted(slices.Values(results)), slices.Sorted(slices.Values(open))
			if m.Role != "user" || !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("message %d (%s) answers %v, want exactly one tool_result for each of %v", i, m.Role, results, open))
			}
		}
		open = nil
		if m.Role == "assistant" {
			open = uses
		}
	}
	if len(open) > 0 {
		problems = append(problems, fmt.Sprintf("tool uses %v never answered", open))
	}
	return problems
}

// compareHistory compares a history with the uncrashed one as canonical
// JSON, allowing a difference only in the tool_result of a tool use in
// doubt, which must then be an is_error result saying the outcome is
// unknown.
func compareHistory(t testing.TB, base, got []*savepointv1.Message, inDoubt map[string]bool) []string {
	var problems []string
	if len(got) != len(base) {
		return []string{fmt.Sprintf("%d messages, the uncrashed run has %d", len(got), len(base))}
	}
	seen := map[string]bool{}
	for i := range got {
		if canon(t, got[i]) == canon(t, base[i]) {
			continue
		}
		var gb, bb []map[string]any
		if got[i].GetRole() != base[i].GetRole() ||
			json.Unmarshal([]byte(got[i].GetContentJson()), &gb) != nil ||
			json.Unmarshal([]byte(base[i].GetContentJson()), &bb) != nil || len(gb) != len(bb) {
			problems = append(problems, fmt.Sprintf("message %d differs:\n got %s\nwant %s", i, canon(t, got[i]), canon(t, base[i])))
			continue
		}
		for j := range gb {
			g, b := gb[j], bb[j]
			gj, _ := json.Marshal(g)
			bj, _ := json.Marshal(b)
			if bytes.Equal(gj, bj) {
				continue
			}
			id, _ := g["tool_use_id"].(string)
			text, _ := g["content"].(string)
			if g["type"] == "tool_result" && id == b["tool_use_id"] && inDoubt[id] && g["is_error"] == true &&
				strings.Contains(text, "unknown") && b["is_error"] == nil {
				seen[id] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("message %d block %d differs:\n got %s\nwant %s", i, j, gj, bj))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(inDoubt)) {
		if !seen[id] {
			problems = append(problems, fmt.Sprintf("tool use %s was in doubt, but its result is not an is_error one", id))
		}
	}
	return problems
}

// matrixTable prints the cases as a table: where each run was killed, what
// each resume decided, how many times report.txt was written, and whether
// the case passed.
func matrixTable(cases []*matrixCase) string {
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCRIPT\tCRASH_AFTER (run 1 -> resumes)\tDECISION ON EACH RESUME\tWRITES\tPASS")
	for _, c := range cases {
		pass := "ok"
		if len(c.problems) > 0 {
			pass = "FAIL"
		}
		decision := strings.Join(c.decisions, " -> ")
		if c.na != "" {
			decision = "n/a: " + c.na
			if pass == "ok" {
				pass = "n/a (did not fire)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", c.script, strings.Join(c.crashes, " -> "), decision, c.writes, pass)
	}
	w.Flush()
	return buf.String()
}
