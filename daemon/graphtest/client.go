// Package graphtest is the conformance suite of GraphCheckpointService,
// run through gRPC against a serving daemon, and the client-side helpers it
// uses: reassembling streamed checkpoint tuples and uploading large ones.
// It checks the service as clients see it, whichever store serves it, so it
// sits beside the host that serves it; the store-level suite is
// core/storetest. tests/integration runs it on Badger and PostgreSQL, and
// tests/crashtest across kills.
package graphtest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Tuple is one checkpoint tuple as a client reassembles it from a stream:
// every value whole.
type Tuple struct {
	Checkpoint *savepointv1.GraphCheckpoint
	Blobs      []*savepointv1.ChannelBlob
	Writes     []*savepointv1.PendingWrite
}

// part is what GetCheckpointResponse and ListCheckpointsResponse share.
type part interface {
	proto.Message
	GetCheckpoint() *savepointv1.GraphCheckpoint
	GetBlobs() []*savepointv1.ChannelBlob
	GetPendingWrites() []*savepointv1.PendingWrite
	GetValueChunk() []byte
}

// Collect reads a stream to its end and reassembles its tuples. It fails
// when a message is over budget bytes (budget 0: no check), or when the
// stream breaks the framing rules of docs/protocol.md.
func Collect[M part](recv func() (M, error), budget int) ([]*Tuple, error) {
	var out []*Tuple
	var open *savepointv1.TypedValue // the value being continued
	track := func(v *savepointv1.TypedValue) error {
		if open != nil {
			return errors.New("a new item arrived before the previous value was complete")
		}
		if v != nil && int64(len(v.Data)) < v.TotalSize {
			open = v
		}
		return nil
	}
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			if open != nil {
				return nil, errors.New("the stream ended inside a value")
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if n := proto.Size(m); budget > 0 && n > budget {
			return nil, fmt.Errorf("a response message of %d bytes is over the %d-byte budget", n, budget)
		}
		if c := m.GetValueChunk(); len(c) > 0 {
			if open == nil {
				return nil, errors.New("a value_chunk arrived with no value open")
			}
			open.Data = append(open.Data, c...)
			if int64(len(open.Data)) > open.TotalSize {
				return nil, errors.New("a value received more bytes than its total_size")
			}
			if int64(len(open.Data)) == open.TotalSize {
				open = nil
			}
		}
		if c := m.GetCheckpoint(); c != nil {
			if err := track(c.GetCheckpoint()); err != nil {
				return nil, err
			}
			out = append(out, &Tuple{Checkpoint: c})
		}
		if len(m.GetBlobs())+len(m.GetPendingWrites()) > 0 && len(out) == 0 {
			return nil, errors.New("blobs or writes arrived before any checkpoint")
		}
		for _, b := range m.GetBlobs() {
			if err := track(b.GetValue()); err != nil {
				return nil, err
			}
			out[len(out)-1].Blobs = append(out[len(out)-1].Blobs, b)
		}
		for _, w := range m.GetPendingWrites() {
			if err := track(w.GetValue()); err != nil {
				return nil, err
			}
			out[len(out)-1].Writes = append(out[len(out)-1].Writes, w)
		}
	}
}

// Get reads one checkpoint; nil when there is none.
func Get(ctx context.Context, c savepointv1.GraphCheckpointServiceClient, req *savepointv1.GetCheckpointRequest, budget int) (*Tuple, error) {
	st, err := c.GetCheckpoint(ctx, req)
	if err != nil {
		return nil, err
	}
	ts, err := Collect(st.Recv, budget)
	if err != nil {
		return nil, err
	}
	switch len(ts) {
	case 0:
		return nil, nil
	case 1:
		return ts[0], nil
	}
	return nil, fmt.Errorf("GetCheckpoint sent %d checkpoints", len(ts))
}

// List reads every listed checkpoint.
func List(ctx context.Context, c savepointv1.GraphCheckpointServiceClient, req *savepointv1.ListCheckpointsRequest, budget int) ([]*Tuple, error) {
	st, err := c.ListCheckpoints(ctx, req)
	if err != nil {
		return nil, err
	}
	return Collect(st.Recv, budget)
}

// Upload sends a put as an UploadCheckpoint stream in chunks of chunk bytes.
func Upload(ctx context.Context, c savepointv1.GraphCheckpointServiceClient, req *savepointv1.PutCheckpointRequest, chunk int) (*savepointv1.UploadCheckpointResponse, error) {
	st, err := c.UploadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	start := &savepointv1.UploadCheckpointStart{
		Checkpoint: proto.CloneOf(req.GetCheckpoint()),
		RequestId:  req.GetRequestId(),
	}
	values := []*savepointv1.TypedValue{req.GetCheckpoint().GetCheckpoint()}
	start.Checkpoint.Checkpoint = &savepointv1.TypedValue{Type: values[0].GetType(), TotalSize: int64(len(values[0].GetData()))}
	for _, b := range req.GetBlobs() {
		values = append(values, b.GetValue())
		start.Blobs = append(start.Blobs, &savepointv1.ChannelBlob{Channel: b.GetChannel(), Version: b.GetVersion(),
			Value: &savepointv1.TypedValue{Type: b.GetValue().GetType(), TotalSize: int64(len(b.GetValue().GetData()))}})
	}
	// A Send that fails with io.EOF means the server ended the call; its
	// status comes from CloseAndRecv.
	send := func(m *savepointv1.UploadCheckpointRequest) error {
		if err := st.Send(m); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	if err := send(&savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Start{Start: start}}); err != nil {
		return nil, err
	}
	var buf []byte
	for _, v := range values {
		buf = append(buf, v.GetData()...)
		for len(buf) >= chunk {
			if err := send(&savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Chunk{Chunk: buf[:chunk]}}); err != nil {
				return nil, err
			}
			buf = buf[chunk:]
		}
	}
	if len(buf) > 0 {
		if err := send(&savepointv1.UploadCheckpointRequest{Part: &savepointv1.UploadCheckpointRequest_Chunk{Chunk: buf}}); err != nil {
			return nil, err
		}
	}
	return st.CloseAndRecv()
}

// UploadWrites sends a PutWrites request as an UploadWrites stream in chunks
// of chunk bytes.
func UploadWrites(ctx context.Context, c savepointv1.GraphCheckpointServiceClient, req *savepointv1.PutWritesRequest, chunk int) (*savepointv1.UploadWritesResponse, error) {
	st, err := c.UploadWrites(ctx)
	if err != nil {
		return nil, err
	}
	start := &savepointv1.UploadWritesStart{ThreadId: req.GetThreadId(), CheckpointNs: req.GetCheckpointNs(), CheckpointId: req.GetCheckpointId(),
		TaskId: req.GetTaskId(), TaskPath: req.GetTaskPath(), RequestId: req.GetRequestId()}
	var data []byte
	for _, w := range req.GetWrites() {
		v := w.GetValue()
		start.Writes = append(start.Writes, &savepointv1.ChannelWrite{Idx: w.GetIdx(), Channel: w.GetChannel(),
			Value: &savepointv1.TypedValue{Type: v.GetType(), TotalSize: int64(len(v.GetData()))}})
		data = append(data, v.GetData()...)
	}
	// A Send that fails with io.EOF means the server ended the call; its
	// status comes from CloseAndRecv.
	send := func(m *savepointv1.UploadWritesRequest) error {
		if err := st.Send(m); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	if err := send(&savepointv1.UploadWritesRequest{Part: &savepointv1.UploadWritesRequest_Start{Start: start}}); err != nil {
		return nil, err
	}
	for len(data) > 0 {
		n := min(chunk, len(data))
		if err := send(&savepointv1.UploadWritesRequest{Part: &savepointv1.UploadWritesRequest_Chunk{Chunk: data[:n]}}); err != nil {
			return nil, err
		}
		data = data[n:]
	}
	return st.CloseAndRecv()
}
