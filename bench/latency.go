package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Scenario 1: save latency, one session

// SaveLatency times the SaveCheckpoint calls of Point A + Point B cycles in
// one session against the same bytes written durably by each baseline, and
// against empty, an RPC to the same daemon that does nothing: the round
// trip every save pays before it stores anything; and against seq, that
// RPC followed by the baseline's write+fdatasync, the floor's two costs
// paid in a save's order.
func (b *Bench) SaveLatency(ctx context.Context, spd, empty, seq Target) error {
	targets := append([]Target{spd, empty, seq}, latencyBaselines()...)
	n := b.cfg.Cycles
	saves := make([]*Save, 0, 2*(n+warmCycles))
	for i := range n + warmCycles {
		saves = append(saves, b.pointA(i), b.pointB())
	}
	p50 := map[string][]float64{}
	p99 := map[string][]float64{}
	for rep := range b.cfg.Reps {
		for _, t := range targets {
			lat, err := b.timeSaves(ctx, t, saves)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			p50[t.Name()] = append(p50[t.Name()], ms(Percentile(lat, 50)))
			p99[t.Name()] = append(p99[t.Name()], ms(Percentile(lat, 99)))
		}
		b.log("scenario 1: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	floor, bdg := p50[fsyncTarget{}.Name()], p50[badgerTarget{}.Name()]
	t := &Table{
		Title:  "1. Save latency, one session (Point A + Point B cycles)",
		Header: []string{"system", "p50 ms", "p99 ms", "p50 / write+fdatasync", "p50 / badger txn"},
		Notes: []string{
			fmt.Sprintf("%d saves (%d cycles) per system per repetition after %d warm-up cycles; %d repetitions, systems interleaved; each figure the median over repetitions, each ratio the median of the per-repetition ratios.",
				2*n, n, warmCycles, b.cfg.Reps),
			fmt.Sprintf("Each save appends one %d-byte message (Point A also leaves one tool use pending); the baselines write the %d-byte encoded SaveCheckpointRequest.", b.cfg.MessageBytes, len(saves[0].Bytes)),
			"Empty RPC: grpc.health.v1 Check on the same daemon, over a connection of its own, in place of each save: the gRPC round trip alone, with nothing stored or synced.",
			"Empty RPC, then write+fdatasync: the two, one after the other, timed together: the floor's costs in the order a save pays them. Above the sum of the two rows' p50s by what this machine adds to a sync that follows a wait on the socket (most likely an idle CPU woken again).",
		},
	}
	for _, tg := range targets {
		name := tg.Name()
		t.Add(name, Median(p50[name]), Median(p99[name]), MedianRatio(p50[name], floor), MedianRatio(p50[name], bdg))
	}
	b.tables = append(b.tables, t)
	b.summary["save_p50_vs_fsync"] = MedianRatio(p50[spd.Name()], floor)
	b.summary["save_p50_vs_badger"] = MedianRatio(p50[spd.Name()], bdg)
	b.summary["save_p50_vs_floor"] = MedianRatio(p50[spd.Name()], Sum(p50[empty.Name()], floor))
	b.summary["save_p50_vs_sequence_floor"] = MedianRatio(p50[spd.Name()], p50[seq.Name()])
	b.summary["sequence_floor_vs_floor"] = MedianRatio(p50[seq.Name()], Sum(p50[empty.Name()], floor))
	return nil
}

const warmCycles = 10

// timeSaves opens t, saves each of saves in one session, and returns the
// latency of each save after the warm-up cycles.
func (b *Bench) timeSaves(ctx context.Context, t Target, saves []*Save) (lat []time.Duration, err error) {
	dir, err := b.dir()
	if err != nil {
		return nil, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	w, err := st.Session(ctx, 0)
	if err != nil {
		return nil, err
	}
	for i, s := range saves {
		took, err := timedSave(ctx, w, s)
		if err != nil {
			return nil, err
		}
		if i >= 2*warmCycles {
			lat = append(lat, took)
		}
	}
	return lat, nil
}
