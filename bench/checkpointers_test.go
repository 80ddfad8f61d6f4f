package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestMain(m *testing.M) {
	if os.Getenv("BENCH_FAKE_PYSAVER") != "" {
		fakePySaver()
		return
	}
	os.Exit(m.Run())
}

// fakePySaver stands in for checkpointers.py: the test binary run again
// with BENCH_FAKE_PYSAVER set answers its requests, each after a delay that
// puts the answers out of order.
func fakePySaver() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := bufio.NewWriter(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	messages := map[string]int{}
	for sc.Scan() {
		var req map[string]any
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			os.Exit(3)
		}
		wg.Go(func() {
			ans := map[string]any{"id": req["id"], "ok": true}
			switch req["op"] {
			case "save":
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				ans["us"] = 1500.0
				mu.Lock()
				messages[fmt.Sprint(req["s"])] += len(req["messages"].([]any))
				mu.Unlock()
			case "prefill":
				mu.Lock()
				messages[fmt.Sprint(req["s"])] += len(req["messages"].([]any))
				mu.Unlock()
			case "resume":
				ans["us"], ans["messages"] = 2500.0, messages["-1"]
			case "die":
				os.Exit(4)
			case "open", "close", "session":
			default:
				ans = map[string]any{"id": req["id"], "ok": false, "error": fmt.Sprintf("unknown op %v", req["op"])}
			}
			b, _ := json.Marshal(ans)
			mu.Lock()
			out.Write(append(b, '\n'))
			out.Flush()
			mu.Unlock()
		})
	}
	wg.Wait()
}

func startFakePy(t *testing.T) *pyProc {
	t.Helper()
	t.Setenv("BENCH_FAKE_PYSAVER", "1")
	p, err := startPy([]string{os.Args[0]}, "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPyTarget: saves of many sessions in flight together each get their
// own answer, the script's time is the save's, and Resume reads back.
func TestPyTarget(t *testing.T) {
	p := startFakePy(t)
	ctx := context.Background()
	tg := &pyTarget{name: "fake", kind: "sqlite", proc: p}
	st, err := tg.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	save := newSave([]*savepointv1.Message{textMessage(rng, "user", 100)}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		w, err := st.Session(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range 20 {
				took, err := timedSave(ctx, w, save)
				if err != nil {
					errs <- err
					return
				}
				if took != 1500*time.Microsecond {
					errs <- fmt.Errorf("session %d: save took %v, want the script's 1.5ms", i, took)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	msgs := make([]*savepointv1.Message, 30)
	for i := range msgs {
		msgs[i] = textMessage(rng, "user", 64)
	}
	took, err := st.(resumer).Resume(ctx, msgs)
	if err != nil || took != 2500*time.Microsecond {
		t.Errorf("Resume: %v, %v; want 2.5ms", took, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.call(ctx, map[string]any{"op": "nope"}); err == nil || !strings.Contains(err.Error(), "unknown op nope") {
		t.Errorf("an op the script refuses: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPyProcDies: a script that exits fails the calls waiting and every
// later one, instead of leaving them waiting.
func TestPyProcDies(t *testing.T) {
	p := startFakePy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.call(ctx, map[string]any{"op": "die"}); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the call that ended the script: %v, want its end reported", err)
	}
	if _, err := p.call(ctx, map[string]any{"op": "open"}); err == nil {
		t.Error("a call after the script ended succeeded")
	}
	if err := p.Close(); err == nil {
		t.Error("Close of a script that exited 4: no error")
	}
}

// fakeRestarter counts its saves and restarts.
type fakeRestarter struct {
	saves    int
	restarts []int // saves done at each restart
}

func (f *fakeRestarter) Save(context.Context, *Save) error {
	f.saves++
	return nil
}

func (f *fakeRestarter) Restart(context.Context) error {
	f.restarts = append(f.restarts, f.saves)
	return nil
}

func TestConversationsRestart(t *testing.T) {
	f := &fakeRestarter{}
	w := &convWriter{w: f, r: f, turns: 50}
	for range 120 {
		if err := w.Save(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if f.saves != 120 || fmt.Sprint(f.restarts) != "[50 100]" {
		t.Errorf("%d saves, restarts after %v; want 120, a new conversation after 50 and 100", f.saves, f.restarts)
	}
	// A store whose writers cannot start a conversation is refused.
	st, err := conversations{fsyncTarget{}, 50}.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Session(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "cannot start a new conversation") {
		t.Errorf("conversations of write+fdatasync: %v", err)
	}
}

// TestSeedJSONTarget: the seed's file is its checkpoint, indented, holding
// the whole conversation; Restart begins a new file; Resume reads it all.
func TestSeedJSONTarget(t *testing.T) {
	dir, saves := saveThree(t, jsonTarget{whole: true, seed: true}, 1)
	b, err := os.ReadFile(filepath.Join(dir, "session-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("{\n  \"version\": 1,\n  \"task\": ")) {
		t.Errorf("not indented as JSON.stringify(cp, null, 2):\n%.200s", b)
	}
	var cp struct {
		Version  int `json:"version"`
		Turns    int `json:"turns"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		PendingToolUse *struct{ ID, Name string } `json:"pendingToolUse"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Version != 1 || cp.Turns != 3 || len(cp.Messages) != 3 || cp.PendingToolUse != nil {
		t.Errorf("version %d, turns %d, %d messages, pending %v; want 1, 3, 3, null", cp.Version, cp.Turns, len(cp.Messages), cp.PendingToolUse)
	}
	if len(cp.Messages[2].Content) != 1 {
		t.Fatalf("the last message's content: %d blocks, want 1", len(cp.Messages[2].Content))
	}
	var got, want any
	json.Unmarshal(cp.Messages[2].Content[0], &got)
	json.Unmarshal([]byte(saves[2].Messages[0].GetContentJson()), &want)
	if fmt.Sprint(got) != fmt.Sprint(want) || cp.Messages[2].Role != "assistant" {
		t.Errorf("the last message is not the last save's")
	}

	ctx := context.Background()
	st, err := jsonTarget{whole: true, seed: true}.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Session(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.(restarter).Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Save(ctx, saves[1]); err != nil {
		t.Fatal(err)
	}
	if jw := w.(*jsonWriter); jw.id != "session-7-c2" || len(jw.history) != 1 {
		t.Errorf("after two restarts and a save: file %s with %d messages, want session-7-c2 with 1", jw.id, len(jw.history))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	msgs := make([]*savepointv1.Message, 2500)
	for i := range msgs {
		msgs[i] = textMessage(rng, "user", 80)
	}
	if _, err := st.(resumer).Resume(ctx, msgs); err != nil {
		t.Error(err)
	}
}

func TestSQLiteResume(t *testing.T) {
	ctx := context.Background()
	st, err := sqliteTarget{}.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	msgs := make([]*savepointv1.Message, 2500)
	for i := range msgs {
		msgs[i] = textMessage(rng, "user", 80)
	}
	if _, err := st.(resumer).Resume(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	w, err := st.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	save := newSave(msgs[:1], nil)
	for range 2 {
		if err := w.Save(ctx, save); err != nil {
			t.Fatal(err)
		}
		if err := w.(restarter).Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each conversation starts at revision 1 under its own key: no
	// primary-key clash.
	if err := w.Save(ctx, save); err != nil {
		t.Fatal(err)
	}
}

func testFigures() ([]string, map[string]*cpFigures) {
	names := []string{"savepointd (Badger)", "JSON file (the seed's)"}
	figs := map[string]*cpFigures{}
	for i, n := range names {
		f := newCPFigures()
		k := float64(i + 1)
		f.p50, f.p99 = []float64{0.5 * k, 0.7 * k, 0.6 * k}, []float64{2 * k, 3 * k, 2.5 * k}
		for j, s := range checkpointerSessions {
			f.rate[s] = []float64{1000 * k * float64(j+1), 1100 * k * float64(j+1), 900 * k * float64(j+1)}
		}
		f.early, f.late = []float64{10240 * k, 11264 * k, 9216 * k}, []float64{20480 * k * k, 21504 * k * k, 19456 * k * k}
		f.resume = []float64{120 * k, 130 * k, 110 * k}
		figs[n] = f
	}
	return names, figs
}

// TestCheckpointerTable pins the comparison's table: its columns, the
// medians in each cell, and its notes.
func TestCheckpointerTable(t *testing.T) {
	names, figs := testFigures()
	tab := checkpointerTable(names, figs, cpSetting{
		MessageBytes: 2048, Cycles: 150, Reps: 3, Turns: 2000, ResumeMessages: 10000,
		Window: 3 * time.Second, Warmup: time.Second, ResumeMiB: 19.6, PostgresVersion: "15.18",
	})
	if len(tab.Rows) != 2 || tab.Rows[0][1] != "0.6" || tab.Rows[1][3] != "2000" || tab.Rows[1][7] != "80.0" {
		t.Errorf("rows: %q", tab.Rows)
	}
	var out bytes.Buffer
	tab.Print(&out)
	golden(t, "checkpointers.golden", out.Bytes())
}

func TestCheckpointerConfig(t *testing.T) {
	bin := os.Args[0]
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-checkpointers", "-savepointd", bin, "-langgraph-python", "py", "-checkpointers-script", "c.py", "-plots", "p"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if want := CheckpointersConfig(); !cfg.Checkpointers || cfg.Reps != want.Reps || cfg.Window != want.Window || cfg.CheckpointersScript != "c.py" || cfg.PlotDir != "p" {
		t.Errorf("-checkpointers: %+v", cfg)
	}
	if cfg, err := parseFlags([]string{"-checkpointers", "-quick", "-savepointd", bin}, &stderr); err != nil || cfg.Window != QuickConfig().Window || !cfg.Checkpointers {
		t.Errorf("-checkpointers -quick: window %v, %v; want the quick run's", cfg.Window, err)
	}
}

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	var cdf []cdfSeries
	var tput []tputSeries
	for i, name := range []string{"a", "b", "c"} {
		s := cdfSeries{Name: name}
		for range 300 {
			s.Lat = append(s.Lat, time.Duration((i+1)*int(time.Millisecond)/2+rng.IntN(int(time.Millisecond))))
		}
		cdf = append(cdf, s)
		tput = append(tput, tputSeries{Name: name, Rate: []float64{100 * float64(i+1), 300 * float64(i+1), 0}})
	}
	for _, f := range []struct {
		name string
		draw func(string) error
	}{
		{"cdf.png", func(p string) error { return plotLatencyCDF(p, cdf) }},
		{"tput.png", func(p string) error { return plotThroughput(p, checkpointerSessions, tput) }},
	} {
		path := filepath.Join(dir, f.name)
		if err := f.draw(path); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		r, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
			t.Errorf("%s: %v, want a readable size", f.name, b)
		}
	}
	if err := plotLatencyCDF(filepath.Join(dir, "x.png"), []cdfSeries{{Name: "none"}}); err == nil {
		t.Error("a CDF of no latencies was drawn")
	}
	if err := plotThroughput(filepath.Join(dir, "x.png"), checkpointerSessions, []tputSeries{{Name: "short", Rate: []float64{1}}}); err == nil {
		t.Error("a throughput line of the wrong length was drawn")
	}
}

func TestCDFPoints(t *testing.T) {
	var lat []time.Duration
	for i := range 5000 {
		lat = append(lat, time.Duration(5000-i)*time.Microsecond)
	}
	xys := cdfPoints(lat, 1000)
	if len(xys) > 1001 || len(xys) < 900 {
		t.Errorf("%d points, want about 1000", len(xys))
	}
	for i := 1; i < len(xys); i++ {
		if xys[i].X < xys[i-1].X || xys[i].Y <= xys[i-1].Y {
			t.Fatalf("point %d %v after %v: not increasing", i, xys[i], xys[i-1])
		}
	}
	if first, last := xys[0], xys[len(xys)-1]; first.X != 0.001 || last.X != 5 || last.Y != 1 {
		t.Errorf("from %v to %v, want from 0.001 ms to 5 ms at 1", first, last)
	}
}

func TestTickers125(t *testing.T) {
	var got []string
	for _, tk := range (tickers125{}).Ticks(150, 6000) {
		got = append(got, tk.Label)
	}
	if strings.Join(got, " ") != "200 500 1000 2000 5000" {
		t.Errorf("ticks %v", got)
	}
}

func TestAddedWrites(t *testing.T) {
	if n := addedWrites(nil, map[int]int64{1: 500}); n != 0 {
		t.Errorf("the first reading added %d, want 0 (the baseline)", n)
	}
	// 1 grew by 100, 2 ended (its last reading lost nothing counted), 3 is
	// new with 40.
	if n := addedWrites(map[int]int64{1: 500, 2: 70}, map[int]int64{1: 600, 3: 40}); n != 140 {
		t.Errorf("added %d, want 140", n)
	}
}

func TestParseStatPPID(t *testing.T) {
	if ppid, ok := parseStatPPID([]byte("4242 (postgres: walwriter (x)) S 17 4242 4242 0 -1")); !ok || ppid != 17 {
		t.Errorf("ppid %d, %v; want 17", ppid, ok)
	}
	kids, err := childrenOf(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range kids {
		found = found || k == os.Getpid()
	}
	if !found {
		t.Errorf("this process (%d) is not among its parent's children %v", os.Getpid(), kids)
	}
}

// TestWriteChars: wchar, what the checkpointer rows written through write
// calls count, parses, and grows by what this process writes.
func TestWriteChars(t *testing.T) {
	if got, err := parseIOField(readTestdata(t, "io"), "wchar"); err != nil || got != 11689 {
		t.Errorf("wchar = %d, %v; want 11689", got, err)
	}
	before, err := Proc{}.WriteChars()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), make([]byte, 10000), 0o600); err != nil {
		t.Fatal(err)
	}
	if after, err := (Proc{}).WriteChars(); err != nil || after-before < 10000 {
		t.Errorf("wchar grew by %d, %v, after a write of 10000 bytes", after-before, err)
	}
}

// TestGrowthTargets: scenario 3 counts bytes as the checkpointers table
// does: savepointd's at its data directory's block device, so that what
// another process writes there is counted once synced (write_bytes of a
// process would not see it), and the rewrite store's as this process's
// wchar.
func TestGrowthTargets(t *testing.T) {
	d := &Daemon{DataDir: t.TempDir()}
	spd, rewrite := growthTargets(d)
	if _, ok := rewrite.(selfChars); !ok {
		t.Errorf("the rewrite store is %T, want its bytes counted as wchar (selfChars)", rewrite)
	}
	st, err := spd.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	wc := st.(writeCounter)
	before, err := wc.WriteBytes()
	if err != nil {
		t.Skipf("the device under %s cannot be counted here: %v", d.DataDir, err)
	}
	// Another process, not this one's child (a reaped child's I/O is added
	// to its parent's), writes 4 MiB into the data directory, not synced.
	f := filepath.Join(d.DataDir, "f")
	script := `(dd if=/dev/zero of="$1" bs=1M count=4 status=none && touch "$1.done") &`
	if out, err := exec.Command("sh", "-c", script, "sh", f).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(f + ".done"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not finish in 30 s")
		}
	}
	after, err := wc.WriteBytes()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 4<<20 {
		t.Errorf("savepointd's row counted %d bytes after another process wrote 4 MiB in its data directory, want at least 4 MiB", after-before)
	}
}
