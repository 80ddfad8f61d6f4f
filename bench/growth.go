package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Scenario 3: history growth

// HistoryGrowth runs an agent of Turns saves on d, each appending one message,
// and compares save latency and bytes written per save around turn 10 and
// at the last turns, for savepointd and a store that rewrites the whole
// history on every save.
func (b *Bench) HistoryGrowth(ctx context.Context, d *Daemon) error {
	turns := b.cfg.Turns
	history := make([]*Save, turns)
	for i := range history {
		role := "assistant"
		if i%2 == 1 {
			role = "user"
		}
		history[i] = newSave([]*savepointv1.Message{textMessage(b.rng, role, b.cfg.MessageBytes)}, nil)
	}
	// The windows: turns 6..15 ("turn 10") and the last ten turns.
	early, late := window{5, 15}, window{turns - 10, turns}
	spd, rewrite := growthTargets(d)
	type figs struct{ early, late, earlyBytes, lateBytes []float64 }
	got := map[string]*figs{spd.Name(): {}, rewrite.Name(): {}}
	for rep := range b.cfg.Reps {
		for _, t := range []Target{spd, rewrite} {
			e, l, err := b.grow(ctx, t, history, early, late)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			f := got[t.Name()]
			f.early, f.late = append(f.early, e.p50ms), append(f.late, l.p50ms)
			f.earlyBytes, f.lateBytes = append(f.earlyBytes, e.bytesPerSave), append(f.lateBytes, l.bytesPerSave)
		}
		b.log("scenario 3: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	t := &Table{
		Title: fmt.Sprintf("3. History growth: an agent of %d turns, one %d-byte message per turn", turns, b.cfg.MessageBytes),
		Header: []string{"system", "p50 ms at turn 10", fmt.Sprintf("p50 ms at turn %d", turns), fmt.Sprintf("turn %d / turn 10", turns),
			"KiB written per save at 10", fmt.Sprintf("KiB written per save at %d", turns)},
		Notes: []string{
			fmt.Sprintf("Turn 10: the saves of turns 6-15; turn %d: turns %d-%d. Medians over %d repetitions, each a new session.", turns, late.from+1, late.to, b.cfg.Reps),
			"Bytes written per save over the window, counted as in the checkpointers table: for savepointd, the sectors its data directory's block device wrote, read after a syncfs of that filesystem (every writer on the device is counted: the machine's other processes too); for the rewrite store, what this process passed to write calls (wchar of /proc/self/io). Not write_bytes: this kernel counts a whole large folio each time a synced page is written again.",
			fmt.Sprintf("savepointd saves every turn through the socket; the rewrite store saves turns 1-15, then is given the history of turn %d without writing it and saves the last ten turns.", late.from),
		},
	}
	for _, name := range []string{spd.Name(), rewrite.Name()} {
		f := got[name]
		t.Add(name, Median(f.early), Median(f.late), MedianRatio(f.late, f.early), Median(f.earlyBytes)/1024, Median(f.lateBytes)/1024)
	}
	b.tables = append(b.tables, t)
	b.summary["growth_2000_vs_10"] = MedianRatio(got[spd.Name()].late, got[spd.Name()].early)
	return nil
}

// window is the turns from+1 .. to (history[from:to]).
type window struct{ from, to int }

type windowResult struct{ p50ms, bytesPerSave float64 }

// measure saves history[w.from:w.to] through wr and returns their median
// latency and the bytes p counts per save.
func measure(ctx context.Context, wr Writer, history []*Save, w window, p writeCounter) (windowResult, error) {
	wb0, err := p.WriteBytes()
	if err != nil {
		return windowResult{}, err
	}
	var lat []time.Duration
	for _, s := range history[w.from:w.to] {
		took, err := timedSave(ctx, wr, s)
		if err != nil {
			return windowResult{}, err
		}
		lat = append(lat, took)
	}
	wb1, err := p.WriteBytes()
	if err != nil {
		return windowResult{}, err
	}
	return windowResult{p50ms: ms(Percentile(lat, 50)), bytesPerSave: float64(wb1-wb0) / float64(w.to-w.from)}, nil
}

// grow opens t in a new directory and saves history in one session,
// measuring the early and late windows. Between them it saves every turn,
// unless the writer is a prefiller (a store that writes the whole history
// each time), which is handed those turns without writing them. Bytes are
// the store's writeCounter's, or this process's.
func (b *Bench) grow(ctx context.Context, t Target, history []*Save, early, late window) (e, l windowResult, err error) {
	dir, err := b.dir()
	if err != nil {
		return e, l, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return e, l, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	w, err := st.Session(ctx, 0)
	if err != nil {
		return e, l, err
	}
	var wc writeCounter = Proc{}
	if c, ok := st.(writeCounter); ok {
		wc = c
	}
	plain := func(from, to int) error {
		for _, s := range history[from:to] {
			if err := w.Save(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := plain(0, early.from); err != nil {
		return e, l, err
	}
	if e, err = measure(ctx, w, history, early, wc); err != nil {
		return e, l, err
	}
	if p, ok := w.(prefiller); ok {
		for _, s := range history[early.to:late.from] {
			if err := p.Prefill(s.Messages); err != nil {
				return e, l, err
			}
		}
	} else if err := plain(early.to, late.from); err != nil {
		return e, l, err
	}
	l, err = measure(ctx, w, history, late, wc)
	return e, l, err
}

// growthTargets are scenario 3's two rows: savepointd on d, its bytes
// counted at its data directory's block device (deviceCounted), and the
// store that rewrites the whole history as one JSON file, its bytes counted
// as this process's wchar (charsCounted).
func growthTargets(d *Daemon) (spd, rewrite Target) {
	return deviceCounted(d, "growth", ""), charsCounted(jsonTarget{whole: true})
}
