package pgstore_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// BenchmarkSave: one session's saves, one after another (scenario 1 of the
// benchmark program, without gRPC), with the round trips per save.
func BenchmarkSave(b *testing.B) {
	srv := pgtest.NewDurable(b)
	rt := &roundTrips{}
	s := open(b, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) { o.Tracer = rt })
	msg := []core.Message{{Role: "user", ContentJSON: `"` + strings.Repeat("x", 2048) + `"`}}
	rev, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"})
	if err != nil {
		b.Fatal(err)
	}
	before := rt.n.Load()
	n := 0
	for b.Loop() {
		rev, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev.Revision, Epoch: rev.Epoch,
			RequestID: fmt.Sprint("r", n), AppendMessages: msg})
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(rt.n.Load()-before)/float64(n), "roundtrips/op")
}

// BenchmarkSave64: saves of 64 sessions at once, each session's one after
// another (scenario 2's 64 sessions, without gRPC), by group commits in
// flight.
func BenchmarkSave64(b *testing.B) {
	srv := pgtest.NewDurable(b)
	for _, writers := range []int{2, 4, 8, 16} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			s := open(b, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) { o.Writers = writers })
			benchmarkSessions(b, s, 64)
		})
	}
}

func benchmarkSessions(b *testing.B, s *pgstore.Store, sessions int) {
	msg := []core.Message{{Role: "user", ContentJSON: `"` + strings.Repeat("x", 2048) + `"`}}
	var next atomic.Int64
	b.SetParallelism(max(1, sessions/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		sid := fmt.Sprint("s", next.Add(1))
		res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid})
		if err != nil {
			b.Error(err)
			return
		}
		for i := 0; pb.Next(); i++ {
			res, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: res.Revision, Epoch: res.Epoch,
				RequestID: fmt.Sprint("r", i), AppendMessages: msg})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
