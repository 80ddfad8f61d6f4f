package core

import (
	"context"
	"fmt"
	"hash"
)

// UploadChunk is one staged piece of an upload's value: Value is the
// value's index (0 the checkpoint's, i the i-th blob's, from 1), Seq its
// place among that value's chunks, from 0.
type UploadChunk struct {
	Value, Seq uint32
	Data       []byte
}

// UploadStager is the staging every store's GraphUpload shares: it cuts the
// upload's bytes into each declared value's chunks of at most chunkBytes,
// refuses bytes beyond the declared sizes, digests them for the request id,
// and hands the chunks to the store's stage function in batches of about
// batchBytes, so that no upload is held whole in memory. It is used by one
// goroutine.
type UploadStager struct {
	stage      func(ctx context.Context, chunks []UploadChunk) error
	chunkBytes int
	batchBytes int
	fp         hash.Hash // nil without a request id

	sizes  []int64  // declared: the checkpoint's value, then each blob's
	chunks []uint32 // chunks cut per value
	cur    int      // the value being received
	got    int64    // its bytes received
	buf    []byte   // its bytes not yet in a chunk

	batch     []UploadChunk
	batchSize int
}

// NewUploadStager returns the stager of an upload of values of the given
// sizes, in order, which calls stage with each batch of chunks in order (a
// stage error ends the upload) and adds the bytes to digest, the request
// id's fingerprint, unless it is nil.
func NewUploadStager(sizes []int64, digest hash.Hash, chunkBytes, batchBytes int, stage func(ctx context.Context, chunks []UploadChunk) error) *UploadStager {
	u := &UploadStager{stage: stage, chunkBytes: chunkBytes, batchBytes: batchBytes, fp: digest, sizes: sizes}
	u.chunks = make([]uint32, len(u.sizes))
	u.skipEmpty()
	return u
}

// UploadSizes are the declared sizes of p's values, in the order an upload
// sends them: the checkpoint's, then each blob's.
func (p *GraphPut) UploadSizes() []int64 {
	sizes := []int64{p.Checkpoint.Value.Size}
	for _, b := range p.Blobs {
		sizes = append(sizes, b.Value.Size)
	}
	return sizes
}

// UploadDigest is the digest an upload of p adds its bytes to, for its
// request id; nil without one.
func (p *GraphPut) UploadDigest() hash.Hash {
	if p.RequestID == "" {
		return nil
	}
	return p.Fingerprint()
}

// UploadSizes are the declared sizes of w's values, in the order an upload
// sends them: each write's.
func (w *GraphWrites) UploadSizes() []int64 {
	sizes := make([]int64, 0, len(w.Writes))
	for _, x := range w.Writes {
		sizes = append(sizes, x.Value.Size)
	}
	return sizes
}

// UploadDigest is the digest an upload of w adds its bytes to, for its
// request id; nil without one.
func (w *GraphWrites) UploadDigest() hash.Hash {
	if w.RequestID == "" {
		return nil
	}
	return w.digest()
}

func (u *UploadStager) skipEmpty() {
	for u.cur < len(u.sizes) && u.got == u.sizes[u.cur] {
		u.cur++
		u.got = 0
	}
}

// Write stages the next bytes of the values, in order. Bytes beyond the
// declared sizes are an error wrapping ErrInvalidArgument.
func (u *UploadStager) Write(ctx context.Context, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.fp != nil {
		u.fp.Write(p)
	}
	for len(p) > 0 {
		if u.cur >= len(u.sizes) {
			return fmt.Errorf("%w: the upload sent more bytes than its start declares", ErrInvalidArgument)
		}
		n := min(int64(len(p)), u.sizes[u.cur]-u.got, int64(u.chunkBytes-len(u.buf)))
		u.buf = append(u.buf, p[:n]...)
		u.got += n
		p = p[n:]
		if len(u.buf) == u.chunkBytes || u.got == u.sizes[u.cur] {
			u.batch = append(u.batch, UploadChunk{Value: uint32(u.cur), Seq: u.chunks[u.cur], Data: u.buf})
			u.batchSize += len(u.buf)
			u.chunks[u.cur]++
			u.buf = nil
			if u.batchSize >= u.batchBytes {
				if err := u.flush(ctx); err != nil {
					return err
				}
			}
		}
		u.skipEmpty()
	}
	return nil
}

func (u *UploadStager) flush(ctx context.Context) error {
	if len(u.batch) == 0 {
		return nil
	}
	batch := u.batch
	u.batch, u.batchSize = nil, 0
	return u.stage(ctx, batch)
}

// Finish stages the last batch once every declared byte was written (fewer
// is an error wrapping ErrInvalidArgument) and returns the upload's
// fingerprint for its request id, nil without one.
func (u *UploadStager) Finish(ctx context.Context) (fingerprint []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if u.cur < len(u.sizes) {
		return nil, fmt.Errorf("%w: the upload ended before every declared byte", ErrInvalidArgument)
	}
	if err := u.flush(ctx); err != nil {
		return nil, err
	}
	if u.fp == nil {
		return nil, nil
	}
	return u.fp.Sum(nil), nil
}

// Discard drops the chunks not yet staged, for an upload being aborted.
func (u *UploadStager) Discard() { u.batch, u.batchSize, u.buf = nil, 0, nil }

// Size returns the declared size of value i.
func (u *UploadStager) Size(i int) int64 { return u.sizes[i] }

// Chunks returns how many chunks value i was cut into.
func (u *UploadStager) Chunks(i int) uint32 { return u.chunks[i] }

// Values returns how many values the upload declares: the checkpoint's and
// one per blob.
func (u *UploadStager) Values() int { return len(u.sizes) }

// UploadAborted is the error of an upload whose thread was deleted or
// copied over while it was staged.
func UploadAborted(thread string) error {
	return fmt.Errorf("%w: thread %q was deleted or copied over during the upload; nothing was stored", ErrUploadAborted, thread)
}
