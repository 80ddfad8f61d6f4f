package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// readPieces reads v and returns its bytes and the length of its largest
// piece.
func readPieces(v core.GraphValue) (data []byte, largest int, err error) {
	err = v.Each(func(p []byte) error {
		data = append(data, p...)
		largest = max(largest, len(p))
		return nil
	})
	return data, largest, err
}

// TestGraphLargeValuesInPieces: a value over 1 MiB, stored compressed by
// PostgreSQL or not, is read in pieces of at most 1 MiB by GetCheckpoint,
// ListCheckpoints and ReadGraphThread, never whole, and exactly; a large
// value edited outside savepointd fails its read with ErrCheckpointCorrupt before
// its last piece is handed over.
func TestGraphLargeValuesInPieces(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 3<<20+12345)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	compressible := bytes.Repeat([]byte("a graph value PostgreSQL compresses "), 2<<20/36)
	small := []byte(`"small"`)
	value := func(b []byte) core.GraphValue { return core.GraphValue{Type: "bytes", Data: b, Size: int64(len(b))} }
	put := graphPut("t", "1")
	put.Checkpoint.Value = value(compressible)
	put.Checkpoint.ChannelVersions = map[string]string{"big": "1", "small": "1"}
	put.Blobs = []core.GraphBlob{{Channel: "big", Version: "1", Value: value(random)}, {Channel: "small", Version: "1", Value: value(small)}}
	if _, err := s.PutCheckpoint(ctx, put); err != nil {
		t.Fatal(err)
	}
	w := graphWrites("t", "1")
	w.Writes[0].Value = value(random[:2<<20])
	if _, err := s.PutWrites(ctx, w); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, what string, v core.GraphValue, want []byte) {
		t.Helper()
		got, largest, err := readPieces(v)
		switch {
		case err != nil:
			t.Fatalf("%s: %v", what, err)
		case !bytes.Equal(got, want):
			t.Fatalf("%s: %d bytes read differ from the %d stored", what, len(got), len(want))
		case len(want) > 1<<20 && largest > 1<<20:
			t.Fatalf("%s: a piece of %d bytes, want at most 1 MiB", what, largest)
		}
	}
	checkTuple := func(t *testing.T, tp *core.GraphTuple) {
		t.Helper()
		if len(tp.Blobs) != 2 || len(tp.Writes) != 1 {
			t.Fatalf("tuple with %d blobs and %d writes, want 2 and 1", len(tp.Blobs), len(tp.Writes))
		}
		check(t, "checkpoint", tp.Checkpoint.Value, compressible)
		check(t, "blob big", tp.Blobs[0].Value, random)
		check(t, "blob small", tp.Blobs[1].Value, small)
		check(t, "write", tp.Writes[0].Value, random[:2<<20])
	}
	for _, id := range []string{"", "1"} {
		t.Run(fmt.Sprintf("GetCheckpoint %q", id), func(t *testing.T) {
			found, err := s.GetCheckpoint(ctx, "t", "", id, func(tp *core.GraphTuple) error { checkTuple(t, tp); return nil })
			if err != nil || !found {
				t.Fatalf("GetCheckpoint: %v %v", found, err)
			}
		})
	}
	t.Run("only a blob large", func(t *testing.T) {
		// The read finds it in its second round trip, with COMMIT queued.
		p := graphPut("b", "1")
		p.Blobs[0].Value = value(random)
		if _, err := s.PutCheckpoint(ctx, p); err != nil {
			t.Fatal(err)
		}
		found, err := s.GetCheckpoint(ctx, "b", "", "", func(tp *core.GraphTuple) error {
			check(t, "blob", tp.Blobs[0].Value, random)
			return nil
		})
		if err != nil || !found {
			t.Fatalf("GetCheckpoint: %v %v", found, err)
		}
	})
	t.Run("ListCheckpoints", func(t *testing.T) {
		n := 0
		err := s.ListCheckpoints(ctx, core.GraphListQuery{ThreadID: "t"}, func(tp *core.GraphTuple) error { n++; checkTuple(t, tp); return nil })
		if err != nil || n != 1 {
			t.Fatalf("ListCheckpoints: %d tuples, %v", n, err)
		}
	})
	t.Run("ReadGraphThread", func(t *testing.T) {
		found, err := s.ReadGraphThread(ctx, "t", func(d *core.GraphThreadDump) error {
			if len(d.Checkpoints) != 1 || len(d.Blobs) != 2 || len(d.Writes) != 1 {
				t.Fatalf("dump: %d checkpoints, %d blobs, %d writes", len(d.Checkpoints), len(d.Blobs), len(d.Writes))
			}
			check(t, "dump checkpoint", d.Checkpoints[0].Value, compressible)
			check(t, "dump blob", d.Blobs[0].Value, random)
			check(t, "dump write", d.Writes[0].Value, random[:2<<20])
			return nil
		})
		if err != nil || !found {
			t.Fatalf("ReadGraphThread: %v %v", found, err)
		}
	})
	t.Run("a callback's error", func(t *testing.T) {
		mine := errors.New("mine")
		if _, err := s.GetCheckpoint(ctx, "t", "", "", func(*core.GraphTuple) error { return mine }); err != mine {
			t.Fatalf("GetCheckpoint returned %v, want the callback's own error", err)
		}
	})
	t.Run("Verify", func(t *testing.T) {
		rep, err := s.Verify(ctx)
		if err != nil || len(rep.Damaged) != 0 || rep.CheckedRecords != 8 {
			t.Fatalf("Verify: %+v %v, want 8 rows checked (threads t and b, their checkpoints, 3 blobs, a write), none damaged", rep, err)
		}
	})
	t.Run("edited", func(t *testing.T) {
		srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "graph_blobs"}.Sanitize()+
			" SET data = overlay(data PLACING '\\xff'::bytea FROM octet_length(data) - 10) WHERE channel = 'big'")
		_, err := s.GetCheckpoint(ctx, "t", "", "", func(tp *core.GraphTuple) error {
			got, _, err := readPieces(tp.Blobs[0].Value)
			if len(got) >= len(random) {
				t.Errorf("the edited value's %d bytes were all handed over", len(got))
			}
			return err
		})
		if !errors.Is(err, core.ErrCheckpointCorrupt) {
			t.Fatalf("read of the edited value: %v, want ErrCheckpointCorrupt", err)
		}
		rep, err := s.Verify(ctx)
		if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0].Problem, "graph_blobs row: checksum mismatch") {
			t.Fatalf("Verify after the edit: %+v %v", rep, err)
		}
	})
}

// largestArg records the largest []byte argument of any statement sent.
type largestArg struct{ n atomic.Int64 }

func (r *largestArg) note(args []any) {
	for _, a := range args {
		if b, ok := a.([]byte); ok && int64(len(b)) > r.n.Load() {
			r.n.Store(int64(len(b)))
		}
	}
}

func (r *largestArg) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.note(d.Args)
	return ctx
}
func (r *largestArg) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *largestArg) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *largestArg) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.note(d.Args)
}
func (r *largestArg) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestGraphUploadsAssembledInTheServer: the commit of an upload of a
// checkpoint and of writes assembles each value from its staged chunks in
// the statement that writes its row, so no statement carries more than a
// chunk (1 MiB); the values read back exactly, their checksums (computed
// as the chunks were staged) intact.
func TestGraphUploadsAssembledInTheServer(t *testing.T) {
	srv := pgtest.Shared(t)
	rt := &largestArg{}
	s := open(t, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) { o.Tracer = rt })
	blob := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7)
	cpv, wv := []byte(`{"v": 1}`), bytes.Repeat([]byte("w"), 2<<20+3)
	put := graphPut("t", "1")
	put.RequestID = "r1"
	put.Checkpoint.Value = core.GraphValue{Type: "json", Size: int64(len(cpv))}
	put.Checkpoint.ChannelVersions = map[string]string{"a": "1", "empty": "1"}
	put.Blobs = []core.GraphBlob{{Channel: "a", Version: "1", Value: core.GraphValue{Type: "bytes", Size: int64(len(blob))}},
		{Channel: "empty", Version: "1", Value: core.GraphValue{Type: "empty"}}}
	u, err := s.BeginUpload(ctx, put)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]byte(nil), cpv...), blob...)
	for len(all) > 0 { // in pieces not aligned with the chunks
		n := min(len(all), 700_001)
		if err := u.Write(ctx, all[:n]); err != nil {
			t.Fatal(err)
		}
		all = all[n:]
	}
	if already, err := u.Commit(ctx); err != nil || already {
		t.Fatalf("Commit: %v %v", already, err)
	}
	w := graphWrites("t", "1")
	w.Writes[0].Value = core.GraphValue{Type: "bytes", Size: int64(len(wv))}
	wu, err := s.BeginWritesUpload(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := wu.Write(ctx, wv); err != nil {
		t.Fatal(err)
	}
	if res, err := wu.Commit(ctx); err != nil || res.Written != 1 {
		t.Fatalf("writes Commit: %+v %v", res, err)
	}
	if got := rt.n.Load(); got > 1<<20 {
		t.Errorf("a statement carried %d bytes, want at most a chunk of 1 MiB", got)
	}
	found, err := s.GetCheckpoint(ctx, "t", "", "", func(tp *core.GraphTuple) error {
		for _, c := range []struct {
			what string
			v    core.GraphValue
			want []byte
		}{{"checkpoint", tp.Checkpoint.Value, cpv}, {"blob", tp.Blobs[0].Value, blob}, {"empty blob", tp.Blobs[1].Value, nil}, {"write", tp.Writes[0].Value, wv}} {
			if got, _, err := readPieces(c.v); err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("%s: %d bytes, %v; want the %d uploaded", c.what, len(got), err, len(c.want))
			}
		}
		return nil
	})
	if err != nil || !found {
		t.Fatalf("GetCheckpoint: %v %v", found, err)
	}
	if rep, err := s.Verify(ctx); err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}
