package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// RPCStats are one RPC's latencies.
type RPCStats struct {
	Name               string
	Count              int
	P50, P90, P99, Max time.Duration
	latencies          []time.Duration
}

// ErrorCount counts one kind of failed RPC.
type ErrorCount struct {
	RPC, Code, Reason string
	Count             int
	Allowed           bool
	Example           string
}

// Result is what a run measured.
type Result struct {
	Config  Config
	PID     int // 0 when RSS was not sampled
	Elapsed time.Duration
	Saves   int64 // successful saves
	Turns   int64 // complete turns
	RPCs    []RPCStats
	Errors  []ErrorCount

	// Resident set sizes in bytes; zero when not sampled. RSS counts the
	// pages of Badger's memory-mapped tables and logs (file-backed, which
	// the kernel reclaims at will); the anonymous part (RssAnon) is the
	// daemon's own memory, and the one judged.
	RSSIdle, RSSWarm, RSSEnd, RSSMax, RSSPeak int64
	RSSSettled                                int64         // after Config.Settle without load
	IdleAnon, WarmAnon, EndAnon, EndFile      int64         // RssAnon (and RssFile) at idle, warm-up end and end
	AnonMax                                   int64         // largest RssAnon sampled
	SettledAnon                               int64         // RssAnon after Config.Settle
	WarmAt                                    time.Duration // when the warm-up ended
	WarmSaves                                 int64         // saves done by then
	WarmRPCs                                  int64         // durable RPCs done by then
	RSSErr                                    error         // sampling failed

	// savepointd's CPU time (user + system, from /proc/PID/stat) at the
	// warm-up end and at the end; zero when not sampled.
	CPUWarm, CPUEnd time.Duration
}

// Failures lists why the run failed; empty means it passed.
func (r *Result) Failures() []string {
	var out []string
	for _, e := range r.Errors {
		if !e.Allowed {
			out = append(out, fmt.Sprintf("%d unexpected %s errors from %s (reason %q), e.g. %s", e.Count, e.Code, e.RPC, e.Reason, e.Example))
		}
	}
	if r.Saves == 0 {
		out = append(out, "no save succeeded")
	}
	if r.RSSErr != nil {
		out = append(out, fmt.Sprintf("sampling savepointd's RSS: %v", r.RSSErr))
	}
	if g, ok := r.AnonGrowth(); ok && r.Config.MaxRSSGrowth > 0 && g > r.Config.MaxRSSGrowth {
		out = append(out, fmt.Sprintf("savepointd's anonymous RSS grew %.2fx after warm-up (%s -> %s), over the %.2fx allowed",
			g, mib(r.WarmAnon), mib(r.EndAnon), r.Config.MaxRSSGrowth))
	}
	if r.Config.MaxAnonRSS > 0 && r.AnonMax > r.Config.MaxAnonRSS {
		out = append(out, fmt.Sprintf("savepointd's anonymous RSS reached %s, over the %s allowed",
			mib(r.AnonMax), mib(r.Config.MaxAnonRSS)))
	}
	return out
}

// AnonGrowth is anonymous RSS at the end over anonymous RSS at the end of
// the warm-up.
func (r *Result) AnonGrowth() (float64, bool) {
	if r.WarmAnon <= 0 || r.EndAnon <= 0 {
		return 0, false
	}
	return float64(r.EndAnon) / float64(r.WarmAnon), true
}

// CPUPerRPC is savepointd's CPU time per durable RPC (saves, BeginEffect and
// RecordEffect) and per save between the warm-up end and the end of the
// load; ok is false when CPU was not sampled.
func (r *Result) CPUPerRPC() (perRPC, perSave time.Duration, ok bool) {
	rpcs, saves := r.durableRPCs()-r.WarmRPCs, r.Saves-r.WarmSaves
	cpu := r.CPUEnd - r.CPUWarm
	if r.CPUEnd == 0 || rpcs <= 0 || saves <= 0 {
		return 0, 0, false
	}
	return cpu / time.Duration(rpcs), cpu / time.Duration(saves), true
}

func (r *Result) durableRPCs() int64 {
	var n int64
	for _, s := range r.RPCs[:min(rpcTurn, len(r.RPCs))] {
		n += int64(s.Count)
	}
	return n
}

// Print writes the report.
func (r *Result) Print(out io.Writer) {
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(out, "\n%-26s %9s %9s %9s %9s %9s\n", "latency", "count", "p50", "p90", "p99", "max")
	for _, s := range r.RPCs {
		fmt.Fprintf(out, "%-26s %9d %9s %9s %9s %9s\n", s.Name, s.Count, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
	}
	rpcs := 0
	for _, s := range r.RPCs[:rpcTurn] {
		rpcs += s.Count
	}
	fmt.Fprintf(out, "\nthroughput: %d saves in %.1fs = %.0f saves/s; %.0f turns/s; %.0f RPCs/s\n",
		r.Saves, secs, float64(r.Saves)/secs, float64(r.Turns)/secs, float64(rpcs)/secs)
	if r.PID > 0 {
		fmt.Fprintf(out, "savepointd anonymous RSS: idle %s, warm-up end %s (at %.1fs, %d saves), end %s (%d saves), max sampled %s\n",
			mib(r.IdleAnon), mib(r.WarmAnon), r.WarmAt.Seconds(), r.WarmSaves, mib(r.EndAnon), r.Saves, mib(r.AnonMax))
		fmt.Fprintf(out, "savepointd RSS (anonymous + file-backed): idle %s, end %s (file-backed %s), max sampled %s, VmHWM %s\n",
			mib(r.RSSIdle), mib(r.RSSEnd), mib(r.EndFile), mib(r.RSSMax), mib(r.RSSPeak))
		if r.Config.Settle > 0 {
			fmt.Fprintf(out, "savepointd RSS %v after the load: %s (anon %s)\n", r.Config.Settle, mib(r.RSSSettled), mib(r.SettledAnon))
		}
		if g, ok := r.AnonGrowth(); ok {
			limit := "not checked"
			if r.Config.MaxRSSGrowth > 0 {
				limit = fmt.Sprintf("limit %.2fx", r.Config.MaxRSSGrowth)
			}
			fmt.Fprintf(out, "anonymous RSS growth after warm-up: %.2fx (%s)\n", g, limit)
		}
		if perRPC, perSave, ok := r.CPUPerRPC(); ok {
			cpu := r.CPUEnd - r.CPUWarm
			fmt.Fprintf(out, "savepointd CPU after warm-up: %.2fs (%.2f cores), %.0f us per durable RPC, %.0f us per save\n",
				cpu.Seconds(), cpu.Seconds()/(r.Elapsed-r.WarmAt).Seconds(), float64(perRPC)/1e3, float64(perSave)/1e3)
		}
	}
	if len(r.Errors) == 0 {
		fmt.Fprintln(out, "errors: none")
		return
	}
	fmt.Fprintln(out, "errors:")
	for _, e := range r.Errors {
		tag := "UNEXPECTED"
		if e.Allowed {
			tag = "allowed"
		}
		fmt.Fprintf(out, "  %7d %-24s %-18s %-24s %s  e.g. %s\n", e.Count, e.RPC, e.Code, e.Reason, tag, e.Example)
	}
}

func (s *RPCStats) summarize() {
	slices.Sort(s.latencies)
	s.Count = len(s.latencies)
	if s.Count == 0 {
		return
	}
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(s.Count))) - 1
		return s.latencies[max(i, 0)]
	}
	s.P50, s.P90, s.P99, s.Max = q(0.50), q(0.90), q(0.99), s.latencies[s.Count-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
