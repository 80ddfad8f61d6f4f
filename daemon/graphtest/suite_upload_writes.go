package graphtest

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// testUploadWrites streams pending writes far over the request limit (an
// interrupt value and a channel write of Env.UploadBlobBytes each) and
// reads them back intact; a retry is recognized, a write already stored is
// kept, a special write is replaced, and nothing staged is left behind.
func testUploadWrites(t *testing.T, e *Env) {
	size := e.UploadBlobBytes
	if size == 0 {
		size = 16 << 20
	}
	mustPut(t, e, cp("t", "", "1", "", `{}`, nil))
	base := records(t, e)
	interrupt, big := bigBlob(size+1, 7), bigBlob(size+2, 8)
	req := &savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "task", TaskPath: "p", RequestId: uuid.NewString(),
		Writes: []*savepointv1.ChannelWrite{
			{Idx: 0, Channel: "big", Value: &savepointv1.TypedValue{Type: "msgpack", Data: big}},
			{Idx: 1, Channel: "small", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`)}},
			{Idx: 2, Channel: "empty", Value: &savepointv1.TypedValue{Type: "empty"}},
		}}
	res, err := UploadWrites(ctx, e.Graph, req, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if res.WrittenCount != 3 || res.AlreadyApplied || res.ReceivedBytes != int64(len(big)+1) {
		t.Fatalf("upload response %v", res)
	}
	check := func(want map[string][]byte) {
		t.Helper()
		tp := get(t, e, "t", "", "1")
		got := map[string][]byte{}
		for _, w := range tp.Writes {
			got[w.Channel] = w.GetValue().GetData()
		}
		if len(got) != len(want) {
			t.Fatalf("writes on %v, want %d", len(got), len(want))
		}
		for ch, data := range want {
			if !bytes.Equal(got[ch], data) {
				t.Fatalf("write on %s: %d bytes read back, want its %d", ch, len(got[ch]), len(data))
			}
		}
	}
	check(map[string][]byte{"big": big, "small": []byte(`1`), "empty": nil})
	n1 := records(t, e)

	// A retry of the same upload is recognized; an upload of the stored
	// indexes stores nothing and keeps nothing it staged.
	if res, err := UploadWrites(ctx, e.Graph, req, 3<<20); err != nil || !res.AlreadyApplied {
		t.Fatalf("retried upload: %v, %v; want already applied", res, err)
	}
	again := &savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "task",
		Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "big", Value: &savepointv1.TypedValue{Type: "msgpack", Data: bigBlob(size, 9)}}}}
	if res, err := UploadWrites(ctx, e.Graph, again, 3<<20); err != nil || res.WrittenCount != 0 {
		t.Fatalf("upload of a stored index: %v, %v; want 0 written", res, err)
	}
	check(map[string][]byte{"big": big, "small": []byte(`1`), "empty": nil})
	if n := records(t, e); n != n1 {
		t.Errorf("%d records after uploads that stored nothing, want %d: their staged chunks were kept", n, n1)
	}

	// A special write is replaced, twice; the replaced value's chunks go.
	for i, data := range [][]byte{interrupt, bigBlob(size+1, 10)} {
		up := &savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "ask",
			Writes: []*savepointv1.ChannelWrite{{Idx: -3, Channel: "__interrupt__", Value: &savepointv1.TypedValue{Type: "msgpack", Data: data}}}}
		if res, err := UploadWrites(ctx, e.Graph, up, 3<<20); err != nil || res.WrittenCount != 1 {
			t.Fatalf("upload %d of the interrupt: %v, %v", i, res, err)
		}
		check(map[string][]byte{"big": big, "small": []byte(`1`), "empty": nil, "__interrupt__": data})
		if i == 0 {
			n1 = records(t, e)
		} else if n := records(t, e); n != n1 {
			t.Errorf("%d records after replacing the interrupt with one as large, want %d: the old value's chunks were kept", n, n1)
		}
	}

	// Bad uploads are refused with a reason and store nothing.
	start := &savepointv1.UploadWritesStart{ThreadId: "t", CheckpointId: "1", TaskId: "bad",
		Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", TotalSize: 4}}}}
	for _, tt := range []struct {
		name   string
		msgs   []*savepointv1.UploadWritesRequest
		reason string
	}{
		{"no start", []*savepointv1.UploadWritesRequest{{Part: &savepointv1.UploadWritesRequest_Chunk{Chunk: []byte("1")}}}, "INVALID_UPLOAD"},
		{"too many bytes", []*savepointv1.UploadWritesRequest{{Part: &savepointv1.UploadWritesRequest_Start{Start: start}},
			{Part: &savepointv1.UploadWritesRequest_Chunk{Chunk: []byte("12345")}}}, "INVALID_UPLOAD"},
		{"too few bytes", []*savepointv1.UploadWritesRequest{{Part: &savepointv1.UploadWritesRequest_Start{Start: start}},
			{Part: &savepointv1.UploadWritesRequest_Chunk{Chunk: []byte("123")}}}, "INVALID_UPLOAD"},
		{"data in the start", []*savepointv1.UploadWritesRequest{{Part: &savepointv1.UploadWritesRequest_Start{Start: &savepointv1.UploadWritesStart{
			ThreadId: "t", CheckpointId: "1", TaskId: "bad",
			Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: []byte("1")}}}}}}}, "INVALID_UPLOAD"},
	} {
		st, err := e.Graph.UploadWrites(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tt.msgs {
			_ = st.Send(m) // a refusal ends the call; CloseAndRecv reports it
		}
		_, err = st.CloseAndRecv()
		wantReason(t, err, codes.InvalidArgument, tt.reason, "")
	}
	check(map[string][]byte{"big": big, "small": []byte(`1`), "empty": nil, "__interrupt__": bigBlob(size+1, 10)})

	// Pruning the checkpoint removes its uploaded writes with all they
	// hold: what is left is a checkpoint, as before the uploads, and the
	// first upload's request id.
	mustPut(t, e, cp("t", "", "2", "1", `{}`, nil))
	if _, err := e.Graph.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{"t"}, Strategy: savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST}); err != nil {
		t.Fatal(err)
	}
	if n := records(t, e); n != base+1 {
		t.Errorf("%d records after pruning the uploaded writes' checkpoint, want %d: something of theirs was kept", n, base+1)
	}
}
