package badgerstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
)

// The benchmarks run on-disk stores in b.TempDir(), so every save pays for a
// real sync. Messages carry 512 bytes of content, like savepoint-load's
// default.

const benchMessageBytes = 512

func openBench(b *testing.B) *badgerstore.Store {
	b.Helper()
	s, err := badgerstore.Open(b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchMessage(i int) core.Message {
	text := fmt.Sprintf("message %d ", i)
	text += strings.Repeat("x", max(benchMessageBytes-len(text)-len(`{"text":""}`), 0))
	return core.Message{Role: "user", ContentJSON: `{"text":"` + text + `"}`}
}

// populate creates session sid with n messages, saved in batches, and
// returns its revision.
func populate(b *testing.B, s *badgerstore.Store, sid string, n int) uint64 {
	b.Helper()
	const batch = 1000
	var rev uint64
	for done := 0; done < n || rev == 0; {
		k := min(batch, n-done)
		msgs := make([]core.Message, k)
		for i := range msgs {
			msgs[i] = benchMessage(done + i)
		}
		res, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{SessionID: sid, ExpectedRevision: rev, AppendMessages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		rev, done = res.Revision, done+k
	}
	return rev
}

// BenchmarkSaveAppend shows that a save costs what it appends, not what the
// session already holds: one message appended to a session of 10 messages
// and to one of 10,000 should cost about the same time and allocations.
// (Each iteration appends, so the history grows by b.N over the run; that is
// the point: a real session grows too.)
func BenchmarkSaveAppend(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			s := openBench(b)
			rev := populate(b, s, "append", n)
			msg := []core.Message{benchMessage(n)}
			for b.Loop() {
				res, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{
					SessionID: "append", ExpectedRevision: rev, AppendMessages: msg,
				})
				if err != nil {
					b.Fatal(err)
				}
				rev = res.Revision
			}
		})
	}
}

// BenchmarkConcurrentSaves shows group commit: writers each save to their own
// session as fast as they can; with 64 writers, many saves share one commit
// and its sync. It reports saves/s over the whole run, Badger commits (each
// one sync) per save from Store.Stats, the median latency of a save, and the
// process's CPU per save (the store's own, with Badger's background work:
// no transport). ns/op is the wall time per save of the whole group.
func BenchmarkConcurrentSaves(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openBench(b)
			work := make(chan struct{})
			lat := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			for w := range writers {
				sid := fmt.Sprintf("writer-%d", w)
				rev := populate(b, s, sid, 1)
				msg := []core.Message{benchMessage(w)}
				wg.Go(func() {
					for range work {
						t0 := time.Now()
						res, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{
							SessionID: sid, ExpectedRevision: rev, AppendMessages: msg,
						})
						if err != nil {
							b.Error(err)
							for range work { // let the loop finish
							}
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
						rev = res.Revision
					}
				})
			}
			before, cpu := s.Stats(), cpuTime()
			start := time.Now()
			for b.Loop() {
				work <- struct{}{} // one save, by whichever writer is free
			}
			close(work)
			wg.Wait()
			elapsed := time.Since(start)
			after, cpu := s.Stats(), cpuTime()-cpu

			saves, commits := after.Requests-before.Requests, after.Commits-before.Commits
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(saves)/elapsed.Seconds(), "saves/s")
			if saves > 0 {
				b.ReportMetric(float64(commits)/float64(saves), "commits/save")
				b.ReportMetric(float64(cpu.Microseconds())/float64(saves), "cpu-µs/save")
			}
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			}
		})
	}
}

// BenchmarkResume is an agent's restart on a session of 1,000 messages:
// Resume (which takes ownership, a durable write) and then the whole
// history, as the server's first page would carry it.
func BenchmarkResume(b *testing.B) {
	const n = 1000
	s := openBench(b)
	populate(b, s, "resume", n)
	for b.Loop() {
		cp, err := s.Resume(context.Background(), "resume", false)
		if err != nil {
			b.Fatal(err)
		}
		msgs, err := s.Messages(context.Background(), "resume", cp.Revision, 0, 3<<20, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) != n {
			b.Fatalf("resumed %d messages, want %d", len(msgs), n)
		}
	}
}

// BenchmarkSaveIndependence shows that a save costs the same whatever the
// session already holds: each iteration makes one save of one message to
// each of two sessions that differ only in their stored state (empty or
// 1 MiB, rewritten before each timed save) or in their history (10 or 2,000
// messages), and reports the time ratio of the larger to the smaller (1.0
// is the goal) and the bytes each save read back from the store.
func BenchmarkSaveIndependence(b *testing.B) {
	bigState := `{"s":"` + strings.Repeat("x", 1<<20-16) + `"}`
	b.Run("state=1MiB/state=0", func(b *testing.B) {
		s := openBench(b)
		revs := map[string]uint64{"small": populate(b, s, "small", 10), "big": populate(b, s, "big", 10)}
		save := func(sid, state string) time.Duration {
			t0 := time.Now()
			res, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{
				SessionID: sid, ExpectedRevision: revs[sid], StateJSON: state, AppendMessages: []core.Message{benchMessage(0)},
			})
			if err != nil {
				b.Fatal(err)
			}
			revs[sid] = res.Revision
			return time.Since(t0)
		}
		var small, big time.Duration
		var read uint64
		for b.Loop() {
			b.StopTimer()
			save("big", bigState) // the state the timed save follows
			b.StartTimer()
			r0 := s.Stats().WriteReadBytes
			big += save("big", "{}")
			read += s.Stats().WriteReadBytes - r0
			small += save("small", "{}")
		}
		b.ReportMetric(float64(big)/float64(small), "ratio")
		b.ReportMetric(float64(read)/float64(b.N), "read-B/save")
	})
	b.Run("history=2000/history=10", func(b *testing.B) {
		s := openBench(b)
		revs := map[string]uint64{"short": populate(b, s, "short", 10), "long": populate(b, s, "long", 2000)}
		save := func(sid string) time.Duration {
			t0 := time.Now()
			res, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{
				SessionID: sid, ExpectedRevision: revs[sid], AppendMessages: []core.Message{benchMessage(0)},
			})
			if err != nil {
				b.Fatal(err)
			}
			revs[sid] = res.Revision
			return time.Since(t0)
		}
		var short, long time.Duration
		var read uint64
		for b.Loop() {
			r0 := s.Stats().WriteReadBytes
			long += save("long")
			read += s.Stats().WriteReadBytes - r0
			short += save("short")
		}
		b.ReportMetric(float64(long)/float64(short), "ratio")
		b.ReportMetric(float64(read)/float64(b.N), "read-B/save")
	})
}

// BenchmarkOpen is a start on a store of 10,000 sessions of 4 KiB each
// (about 60 MiB with Badger's tables and logs): "listed" opens with the
// list of verified tables the previous Open left, "unlisted" with it
// deleted, so that every table is read, as every Open did before the list.
// The ratio of the two is what the list saves.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < 10000; i += 32 {
				msgs := make([]core.Message, 8)
				for j := range msgs {
					msgs[j] = benchMessage(j)
				}
				if _, err := s.SaveCheckpoint(context.Background(), &core.SaveRequest{SessionID: fmt.Sprintf("s%05d", i), AppendMessages: msgs}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, listed := range []bool{true, false} {
		name := map[bool]string{true: "listed", false: "unlisted"}[listed]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !listed {
					b.StopTimer()
					os.Remove(filepath.Join(dir, badgerstore.VerifiedFile))
					b.StartTimer()
				}
				s, err := badgerstore.Open(dir, badgerstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}
