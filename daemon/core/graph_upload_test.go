package core

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
)

// TestUploadStager checks how an upload's bytes are cut: each value into
// chunks of at most chunkBytes, in order, staged in batches once they hold
// batchBytes, with too many or too few bytes refused.
func TestUploadStager(t *testing.T) {
	sizes := []int64{5, 0, 9, 3} // the checkpoint's value, then three blobs
	put := func(requestID string) *GraphPut {
		p := &GraphPut{Checkpoint: GraphCheckpoint{ThreadID: "t", ID: "1", Value: GraphValue{Size: sizes[0]}}, RequestID: requestID}
		for _, n := range sizes[1:] {
			p.Blobs = append(p.Blobs, GraphBlob{Channel: "c", Version: "1", Value: GraphValue{Size: n}})
		}
		return p
	}
	data := []byte("aaaaabbbbbbbbbccc")
	for _, tt := range []struct {
		name    string
		splits  []int // lengths of the successive writes
		batches []int // chunks per staged batch
	}{
		{"one write", []int{17}, []int{3, 3}},
		{"byte by byte", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{3, 3}},
		{"across values", []int{6, 10, 1}, []int{3, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var batches [][]UploadChunk
			u := NewUploadStager(put("r").UploadSizes(), put("r").UploadDigest(), 4, 6, func(_ context.Context, c []UploadChunk) error {
				batches = append(batches, c)
				return nil
			})
			rest := data
			for _, n := range tt.splits {
				if err := u.Write(context.Background(), rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			fp, err := u.Finish(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			values := make([][]byte, len(sizes))
			want := map[uint32]uint32{}
			for _, b := range batches {
				got = append(got, len(b))
				for _, c := range b {
					if len(c.Data) > 4 || c.Seq != want[c.Value] {
						t.Fatalf("chunk %d.%d of %d bytes, want seq %d and at most 4 bytes", c.Value, c.Seq, len(c.Data), want[c.Value])
					}
					want[c.Value]++
					values[c.Value] = append(values[c.Value], c.Data...)
				}
			}
			if !slices.Equal(got, tt.batches) {
				t.Errorf("batches of %v chunks, want %v", got, tt.batches)
			}
			if joined := bytes.Join(values, nil); !bytes.Equal(joined, data) {
				t.Errorf("staged %q, want %q", joined, data)
			}
			for i := range sizes {
				if u.Chunks(i) != want[uint32(i)] || u.Size(i) != sizes[i] {
					t.Errorf("value %d: %d chunks of %d bytes, want %d of %d", i, u.Chunks(i), u.Size(i), want[uint32(i)], sizes[i])
				}
			}
			h := put("r").Fingerprint()
			h.Write(data)
			if !bytes.Equal(fp, h.Sum(nil)) {
				t.Error("the fingerprint is not the put's digest of the bytes")
			}
		})
	}

	stage := func(context.Context, []UploadChunk) error { return nil }
	u := NewUploadStager(put("").UploadSizes(), put("").UploadDigest(), 4, 6, stage)
	if err := u.Write(context.Background(), append(data, 'x')); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a byte beyond the declared sizes: %v, want ErrInvalidArgument", err)
	}
	u = NewUploadStager(put("").UploadSizes(), put("").UploadDigest(), 4, 6, stage)
	if err := u.Write(context.Background(), data[:16]); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Finish(context.Background()); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a byte short: %v, want ErrInvalidArgument", err)
	}
	u = NewUploadStager(put("").UploadSizes(), put("").UploadDigest(), 4, 6, func(context.Context, []UploadChunk) error { return ErrUploadAborted })
	if err := u.Write(context.Background(), data); !errors.Is(err, ErrUploadAborted) {
		t.Errorf("a failing stage: %v, want its error", err)
	}
}
