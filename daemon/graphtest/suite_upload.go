package graphtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// bigBlob returns n bytes: a random block of a length prime to every chunk
// size, repeated, so that a misplaced chunk changes the bytes read back.
func bigBlob(n int, seed uint64) []byte {
	block := make([]byte, 65521)
	x := seed | 1
	for i := range block {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		block[i] = byte(x)
	}
	return bytes.Repeat(block, n/len(block)+1)[:n]
}

// testUpload streams a 64 MiB checkpoint (four 16 MiB blobs and a 1 MiB
// checkpoint value, unless Env.UploadBlobBytes says otherwise) and reads it
// back intact.
func testUpload(t *testing.T, e *Env) {
	blobBytes := e.UploadBlobBytes
	if blobBytes == 0 {
		blobBytes = 16 << 20
	}
	n0 := records(t, e)
	c := cp("t", "", "1", "", `{"big":true}`, map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "empty": "1"})
	c.Checkpoint = &savepointv1.TypedValue{Type: "msgpack", Data: bigBlob(1<<20+3, 1)}
	req := &savepointv1.PutCheckpointRequest{Checkpoint: c, RequestId: uuid.NewString()}
	sums := map[string][32]byte{}
	for i, ch := range []string{"a", "b", "c", "d"} {
		data := bigBlob(blobBytes+i, uint64(i+2))
		sums[ch] = sha256.Sum256(data)
		req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: ch, Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: data}})
	}
	req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: "empty", Version: "1", Value: &savepointv1.TypedValue{Type: "empty"}})
	res, err := Upload(ctx, e.Graph, req, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReceivedBytes != int64(4*blobBytes+1<<20+3+6) || res.AlreadyApplied {
		t.Fatalf("upload response %v", res)
	}
	check := func(e *Env) {
		t.Helper()
		tp := get(t, e, "t", "", "")
		if tp == nil || !bytes.Equal(tp.Checkpoint.GetCheckpoint().GetData(), c.Checkpoint.Data) || tp.Checkpoint.MetadataJson != `{"big":true}` {
			t.Fatal("uploaded checkpoint not read back intact")
		}
		if len(tp.Blobs) != 5 {
			t.Fatalf("%d blobs, want 5", len(tp.Blobs))
		}
		for _, b := range tp.Blobs[:4] {
			if sha256.Sum256(b.GetValue().GetData()) != sums[b.Channel] {
				t.Fatalf("blob %s not read back intact (%d bytes)", b.Channel, len(b.GetValue().GetData()))
			}
		}
		if tp.Blobs[4].Channel != "empty" || tp.Blobs[4].GetValue().GetType() != "empty" {
			t.Fatalf("empty blob %v", tp.Blobs[4])
		}
	}
	check(e)
	// The same upload again is answered from its request id.
	if res, err := Upload(ctx, e.Graph, req, 4<<20-1024); err != nil || !res.AlreadyApplied {
		t.Fatalf("retried upload: %v %v", res, err)
	}
	// A re-put of the id without the blobs keeps them (insert-if-absent)
	// and frees the old checkpoint value's chunks.
	mustPut(t, e, cp("t", "", "1", "", `{"big":false}`, c.ChannelVersions))
	if tp := get(t, e, "t", "", ""); len(tp.Blobs) != 5 || tp.Checkpoint.MetadataJson != `{"big":false}` {
		t.Fatalf("re-put: %d blobs, metadata %s", len(tp.Blobs), tp.Checkpoint.MetadataJson)
	}
	if e.Restart != nil {
		e = e.Restart(t)
		mustPut(t, e, c) // restore the uploaded value, inline now (1 MiB)
		check(e)
	}
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if n := records(t, e); n != n0+1 {
		t.Fatalf("%d records after deleting the uploaded thread, want %d (its tombstone)", n, n0+1)
	}
}

func testUploadErrors(t *testing.T, e *Env) {
	mustPut(t, e, cp("seed", "", "1", "", "{}", nil))
	n0 := records(t, e)
	start := func(size int64) *savepointv1.UploadCheckpointRequest {
		c := cp("t", "", "1", "", "{}", nil)
		c.Checkpoint = &savepointv1.TypedValue{Type: "bytes", TotalSize: size}
		return &savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Start{Start: &savepointv1.UploadCheckpointStart{Checkpoint: c}}}
	}
	chunk := func(n int) *savepointv1.UploadCheckpointRequest {
		return &savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Chunk{Chunk: make([]byte, n)}}
	}
	for _, tc := range []struct {
		name    string
		msgs    []*savepointv1.UploadCheckpointRequest
		reason  string
		field   string
		code    codes.Code
		unclose bool
	}{
		{"no message", nil, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"chunk first", []*savepointv1.UploadCheckpointRequest{chunk(3)}, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"two starts", []*savepointv1.UploadCheckpointRequest{start(3), start(3)}, "INVALID_UPLOAD", "start", codes.InvalidArgument, false},
		{"too many bytes", []*savepointv1.UploadCheckpointRequest{start(3 << 20), chunk(2 << 20), chunk(2 << 20)}, "INVALID_UPLOAD", "chunk", codes.InvalidArgument, false},
		{"too few bytes", []*savepointv1.UploadCheckpointRequest{start(3 << 20), chunk(2 << 20)}, "INVALID_UPLOAD", "chunk", codes.InvalidArgument, false},
		{"data in the start", []*savepointv1.UploadCheckpointRequest{{Part: &savepointv1.UploadCheckpointRequest_Start{Start: &savepointv1.UploadCheckpointStart{
			Checkpoint: cp("t", "", "1", "", "{}", nil)}}}}, "INVALID_UPLOAD", "checkpoint.checkpoint.data", codes.InvalidArgument, false},
		{"over the upload limit", []*savepointv1.UploadCheckpointRequest{start(1<<30 + 1)}, "INVALID_UPLOAD", "blobs", codes.InvalidArgument, false},
		{"cancelled", []*savepointv1.UploadCheckpointRequest{start(8 << 20), chunk(3 << 20), chunk(3 << 20)}, "CANCELED", "", codes.Canceled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := e.Graph.UploadCheckpoint(cctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := st.Send(m); err != nil {
					break
				}
			}
			if tc.unclose {
				time.Sleep(200 * time.Millisecond) // let the server stage what was sent
				cancel()
				_, err = st.CloseAndRecv()
				if status.Code(err) != codes.Canceled {
					t.Fatalf("cancelled upload: %v", err)
				}
			} else {
				_, err = st.CloseAndRecv()
				wantReason(t, err, tc.code, tc.reason, tc.field)
			}
			// Nothing is visible and the staged chunks are removed (the
			// server removes them as the call ends, so allow it a moment).
			if tp := get(t, e, "t", "", ""); tp != nil {
				t.Fatalf("a failed upload is visible: %v", tp.Checkpoint)
			}
			deadline := time.Now().Add(5 * time.Second)
			for n := records(t, e); n != n0; n = records(t, e) {
				if time.Now().After(deadline) {
					t.Fatalf("%d records after a failed upload, want %d: staged chunks left behind", n, n0)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// An upload whose thread is deleted meanwhile is aborted.
	st, err := e.Graph.UploadCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, e, cp("t", "", "0", "", "{}", nil))
	before := records(t, e)
	for _, m := range []*savepointv1.UploadCheckpointRequest{start(4 << 20), chunk(2 << 20)} {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	// The thread is deleted once the server has the upload's start: on a
	// store whose staged chunks are records (Badger), once one is counted;
	// on one that stages them inside the upload's own transaction
	// (PostgreSQL), nothing outside shows it, so after 2 s (200 ms was
	// outlasted on a loaded machine).
	for deadline := time.Now().Add(2 * time.Second); records(t, e) == before && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(chunk(2 << 20)); err != nil {
		t.Fatal(err)
	}
	_, err = st.CloseAndRecv()
	wantReason(t, err, codes.Aborted, "UPLOAD_ABORTED", "")
	if tp := get(t, e, "t", "", ""); tp != nil {
		t.Fatalf("an aborted upload is visible: %v", tp.Checkpoint)
	}
}

// testAtomicVisibility runs writers that put checkpoints whose every
// channel has a new blob, inline and uploaded, while readers read the
// latest checkpoint and list the thread: no reader may see a checkpoint
// without all of its blobs.
func testAtomicVisibility(t *testing.T, e *Env) {
	const writers, perWriter = 3, 12
	var done atomic.Bool
	var seen, bad atomic.Int64
	var firstBad atomic.Value
	checkTuple := func(tp *Tuple) {
		seen.Add(1)
		got := blobsOf(tp)
		for ch, v := range tp.Checkpoint.ChannelVersions {
			if _, ok := got[ch+"@"+v]; !ok {
				bad.Add(1)
				firstBad.CompareAndSwap(nil, fmt.Sprintf("%s/%s misses blob %s@%s", tp.Checkpoint.ThreadId, tp.Checkpoint.CheckpointId, ch, v))
			}
		}
	}
	var wg sync.WaitGroup
	var readErr atomic.Value
	for r := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := fmt.Sprintf("t%d", r)
			for !done.Load() {
				tp, err := Get(ctx, e.Graph, &savepointv1.GetCheckpointRequest{ThreadId: thread}, e.Budget)
				if err != nil {
					readErr.CompareAndSwap(nil, err)
					return
				}
				if tp != nil {
					checkTuple(tp)
				}
				ts, err := List(ctx, e.Graph, &savepointv1.ListCheckpointsRequest{ThreadId: thread, Limit: 3}, e.Budget)
				if err != nil {
					readErr.CompareAndSwap(nil, err)
					return
				}
				for _, tp := range ts {
					checkTuple(tp)
				}
			}
		}()
	}
	var ww sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			thread := fmt.Sprintf("t%d", w)
			for i := range perWriter {
				id := fmt.Sprintf("%04d", i)
				versions := map[string]string{}
				req := &savepointv1.PutCheckpointRequest{}
				for _, ch := range []string{"a", "b", "c"} {
					versions[ch] = id
					n := 100
					if i%3 == 2 {
						n = 700 << 10 // an upload of about 2 MiB in staged chunks
					}
					req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: ch, Version: id, Value: &savepointv1.TypedValue{Type: "bytes", Data: bigBlob(n, uint64(i))}})
				}
				req.Checkpoint = cp(thread, "", id, "", "{}", versions)
				var err error
				if i%3 == 2 {
					_, err = Upload(ctx, e.Graph, req, 256<<10)
				} else {
					_, err = e.Graph.PutCheckpoint(ctx, req)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	ww.Wait()
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if bad.Load() > 0 {
		t.Fatalf("%d of %d tuples read missed a blob; first: %v", bad.Load(), seen.Load(), firstBad.Load())
	}
	if seen.Load() == 0 {
		t.Fatal("the readers saw no checkpoint")
	}
	t.Logf("%d tuples read during the writes, none without its blobs", seen.Load())
}

func testRestart(t *testing.T, e *Env) {
	if e.Restart == nil {
		t.Skip("this environment cannot restart its daemon")
	}
	mustPut(t, e, cp("t", "", "1", "", `{"k":1}`, map[string]string{"a": "1"}), blob("a", "1", "A"))
	mustWrites(t, e, "t", "", "1", "task", "p", cw(0, "a", `"w"`), cw(-1, "__error__", `"e"`))
	before := get(t, e, "t", "", "")
	e = e.Restart(t)
	after := get(t, e, "t", "", "")
	if after == nil || !proto.Equal(before.Checkpoint, after.Checkpoint) || !mapsEqual(blobsOf(before), blobsOf(after)) ||
		!slices.Equal(writesOf(before), writesOf(after)) {
		t.Fatalf("after a restart:\n%v\nbefore:\n%v", after, before)
	}
}
