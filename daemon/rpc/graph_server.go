package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// GraphServer serves GraphCheckpointService over a GraphStore: it validates
// each request, translates it to the store's terms, and translates the
// result or error back. It holds no state of its own.
type GraphServer struct {
	savepointv1.UnimplementedGraphCheckpointServiceServer

	store  core.GraphStore
	lim    Limits
	logger *slog.Logger
}

// NewGraphServer returns a GraphServer over store configured by opts (zero
// fields take their defaults).
func NewGraphServer(store core.GraphStore, opts Options) *GraphServer {
	opts = opts.withDefaults()
	return &GraphServer{store: store, lim: opts.Limits, logger: opts.Logger}
}

func (s *GraphServer) fail(ctx context.Context, err error) error {
	st := ToStatus(err)
	if st.Code() == codes.Internal {
		s.logger.ErrorContext(ctx, "internal error", "err", err)
	}
	return st.Err()
}

// PutCheckpoint implements GraphCheckpointServiceServer.
func (s *GraphServer) PutCheckpoint(ctx context.Context, req *savepointv1.PutCheckpointRequest) (*savepointv1.PutCheckpointResponse, error) {
	p, err := validateGraphPut(s.lim, req.GetCheckpoint(), req.GetBlobs(), req.GetRequestId(), false)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	already, err := s.store.PutCheckpoint(ctx, p)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.PutCheckpointResponse{AlreadyApplied: already}, nil
}

// UploadCheckpoint implements GraphCheckpointServiceServer.
func (s *GraphServer) UploadCheckpoint(stream grpc.ClientStreamingServer[savepointv1.UploadCheckpointRequest, savepointv1.UploadCheckpointResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return s.recvErr(ctx, err)
	}
	start := first.GetStart()
	if start == nil {
		return s.fail(ctx, fieldErr("start", reasonInvalidUpload, "must be the first message of an upload"))
	}
	p, err := validateGraphPut(s.lim, start.GetCheckpoint(), start.GetBlobs(), start.GetRequestId(), true)
	if err != nil {
		return s.fail(ctx, err)
	}
	declared := p.Checkpoint.Value.Size
	for _, b := range p.Blobs {
		declared += b.Value.Size
	}
	up, err := s.store.BeginUpload(ctx, p)
	if err != nil {
		return s.fail(ctx, err)
	}
	defer up.Abort()
	received, err := s.receiveUpload(ctx, declared, up.Write, func() ([]byte, bool, error) {
		msg, err := stream.Recv()
		return msg.GetChunk(), msg.GetStart() != nil, err
	})
	if err != nil {
		return err
	}
	already, err := up.Commit(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	return stream.SendAndClose(&savepointv1.UploadCheckpointResponse{ReceivedBytes: received, AlreadyApplied: already})
}

// receiveUpload passes the chunks recv returns to write until the stream
// ends, refusing a second start and any byte beyond or short of declared,
// and returns how many bytes it received; its error is a status.
func (s *GraphServer) receiveUpload(ctx context.Context, declared int64, write func(context.Context, []byte) error, recv func() (chunk []byte, start bool, err error)) (int64, error) {
	var received int64
	for {
		chunk, start, err := recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, s.recvErr(ctx, err)
		}
		if start {
			return 0, s.fail(ctx, fieldErr("start", reasonInvalidUpload, "was sent twice; send it once, first"))
		}
		if received+int64(len(chunk)) > declared {
			return 0, s.fail(ctx, fieldErr("chunk", reasonInvalidUpload, "brings the upload past the %d bytes its start declares", declared))
		}
		if err := write(ctx, chunk); err != nil {
			return 0, s.fail(ctx, err)
		}
		received += int64(len(chunk))
	}
	if received != declared {
		return 0, s.fail(ctx, fieldErr("chunk", reasonInvalidUpload, "the upload ended after %d of the %d bytes its start declares", received, declared))
	}
	return received, nil
}

// recvErr translates a failed Recv: the call's own end, or a transport
// status, which passes through.
func (s *GraphServer) recvErr(ctx context.Context, err error) error {
	if errors.Is(err, io.EOF) {
		return s.fail(ctx, fieldErr("start", reasonInvalidUpload, "is missing: the upload sent no message"))
	}
	if cerr := ctx.Err(); cerr != nil {
		return s.fail(ctx, cerr)
	}
	return err
}

// PutWrites implements GraphCheckpointServiceServer.
func (s *GraphServer) PutWrites(ctx context.Context, req *savepointv1.PutWritesRequest) (*savepointv1.PutWritesResponse, error) {
	w, err := validatePutWrites(req, false)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.PutWrites(ctx, w)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.PutWritesResponse{WrittenCount: int32(res.Written), DroppedLate: res.DroppedLate, AlreadyApplied: res.AlreadyApplied}, nil
}

// UploadWrites implements GraphCheckpointServiceServer.
func (s *GraphServer) UploadWrites(stream grpc.ClientStreamingServer[savepointv1.UploadWritesRequest, savepointv1.UploadWritesResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return s.recvErr(ctx, err)
	}
	start := first.GetStart()
	if start == nil {
		return s.fail(ctx, fieldErr("start", reasonInvalidUpload, "must be the first message of an upload"))
	}
	w, err := validatePutWrites(start, true)
	if err != nil {
		return s.fail(ctx, err)
	}
	var declared int64
	for _, x := range w.Writes {
		declared += x.Value.Size
	}
	up, err := s.store.BeginWritesUpload(ctx, w)
	if err != nil {
		return s.fail(ctx, err)
	}
	defer up.Abort()
	received, err := s.receiveUpload(ctx, declared, up.Write, func() ([]byte, bool, error) {
		msg, err := stream.Recv()
		return msg.GetChunk(), msg.GetStart() != nil, err
	})
	if err != nil {
		return err
	}
	res, err := up.Commit(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	return stream.SendAndClose(&savepointv1.UploadWritesResponse{ReceivedBytes: received,
		WrittenCount: int32(res.Written), DroppedLate: res.DroppedLate, AlreadyApplied: res.AlreadyApplied})
}

// GetCheckpoint implements GraphCheckpointServiceServer.
func (s *GraphServer) GetCheckpoint(req *savepointv1.GetCheckpointRequest, stream grpc.ServerStreamingServer[savepointv1.GetCheckpointResponse]) error {
	ctx := stream.Context()
	if err := validateGraphKey("thread_id", req.GetThreadId(), maxThreadIDLen, true); err != nil {
		return s.fail(ctx, err)
	}
	if err := validateGraphKey("checkpoint_ns", req.GetCheckpointNs(), maxNSLen, false); err != nil {
		return s.fail(ctx, err)
	}
	if err := validateGraphKey("checkpoint_id", req.GetCheckpointId(), maxCheckpointIDLen, false); err != nil {
		return s.fail(ctx, err)
	}
	w := s.tupleWriter(stream.Send)
	_, err := s.store.GetCheckpoint(ctx, req.GetThreadId(), req.GetCheckpointNs(), req.GetCheckpointId(), w.tuple)
	if err != nil {
		return s.sendErr(ctx, err)
	}
	return nil
}

// ListCheckpoints implements GraphCheckpointServiceServer.
func (s *GraphServer) ListCheckpoints(req *savepointv1.ListCheckpointsRequest, stream grpc.ServerStreamingServer[savepointv1.ListCheckpointsResponse]) error {
	ctx := stream.Context()
	q, err := validateListCheckpoints(req)
	if err != nil {
		return s.fail(ctx, err)
	}
	w := s.tupleWriter(func(m *savepointv1.GetCheckpointResponse) error {
		return stream.Send(&savepointv1.ListCheckpointsResponse{
			Checkpoint: m.Checkpoint, Blobs: m.Blobs, PendingWrites: m.PendingWrites, ValueChunk: m.ValueChunk,
		})
	})
	if err := s.store.ListCheckpoints(ctx, q, w.tuple); err != nil {
		return s.sendErr(ctx, err)
	}
	return nil
}

// errSend marks a failed Send, whose error is the transport's own.
type errSend struct{ err error }

func (e errSend) Error() string { return e.err.Error() }

func (s *GraphServer) sendErr(ctx context.Context, err error) error {
	var se errSend
	if errors.As(err, &se) {
		if cerr := ctx.Err(); cerr != nil {
			return s.fail(ctx, cerr)
		}
		return se.err
	}
	return s.fail(ctx, err)
}

// DeleteThread implements GraphCheckpointServiceServer.
func (s *GraphServer) DeleteThread(ctx context.Context, req *savepointv1.DeleteThreadRequest) (*savepointv1.DeleteThreadResponse, error) {
	if err := validateGraphKey("thread_id", req.GetThreadId(), maxThreadIDLen, true); err != nil {
		return nil, s.fail(ctx, err)
	}
	if err := s.store.DeleteThread(ctx, req.GetThreadId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.DeleteThreadResponse{}, nil
}

// DeleteForRuns implements GraphCheckpointServiceServer.
func (s *GraphServer) DeleteForRuns(ctx context.Context, req *savepointv1.DeleteForRunsRequest) (*savepointv1.DeleteForRunsResponse, error) {
	if err := validateGraphIDs("run_ids", req.GetRunIds(), maxRunIDLen); err != nil {
		return nil, s.fail(ctx, err)
	}
	if len(req.GetRunIds()) == 0 {
		return &savepointv1.DeleteForRunsResponse{}, nil
	}
	n, err := s.store.DeleteForRuns(ctx, req.GetRunIds())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.DeleteForRunsResponse{DeletedCheckpoints: int64(n)}, nil
}

// CopyThread implements GraphCheckpointServiceServer.
func (s *GraphServer) CopyThread(ctx context.Context, req *savepointv1.CopyThreadRequest) (*savepointv1.CopyThreadResponse, error) {
	if err := validateGraphKey("source_thread_id", req.GetSourceThreadId(), maxThreadIDLen, true); err != nil {
		return nil, s.fail(ctx, err)
	}
	if err := validateGraphKey("target_thread_id", req.GetTargetThreadId(), maxThreadIDLen, true); err != nil {
		return nil, s.fail(ctx, err)
	}
	if req.GetSourceThreadId() == req.GetTargetThreadId() {
		return nil, s.fail(ctx, fieldErr("target_thread_id", reasonInvalidGraphKey, "is the source thread; copy to another thread"))
	}
	n, err := s.store.CopyThread(ctx, req.GetSourceThreadId(), req.GetTargetThreadId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.CopyThreadResponse{CopiedCheckpoints: int64(n)}, nil
}

// Prune implements GraphCheckpointServiceServer.
func (s *GraphServer) Prune(ctx context.Context, req *savepointv1.PruneRequest) (*savepointv1.PruneResponse, error) {
	if err := validateGraphIDs("thread_ids", req.GetThreadIds(), maxThreadIDLen); err != nil {
		return nil, s.fail(ctx, err)
	}
	var strategy core.PruneStrategy
	switch req.GetStrategy() {
	case savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST:
		strategy = core.PruneKeepLatest
	case savepointv1.PruneStrategy_PRUNE_STRATEGY_DELETE:
		strategy = core.PruneDelete
	default:
		return nil, s.fail(ctx, fieldErr("strategy", reasonMissingField, "is %v; choose KEEP_LATEST or DELETE", req.GetStrategy()))
	}
	if len(req.GetThreadIds()) == 0 {
		return &savepointv1.PruneResponse{}, nil
	}
	n, err := s.store.Prune(ctx, req.GetThreadIds(), strategy)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.PruneResponse{DeletedCheckpoints: int64(n)}, nil
}

// tupleWriter sends checkpoint tuples as GetCheckpointResponse messages of
// at most budget bytes each, cutting large values into value_chunk
// continuations.
type tupleWriter struct {
	budget int
	send   func(*savepointv1.GetCheckpointResponse) error
	cur    *savepointv1.GetCheckpointResponse
	size   int
}

// graphFrameMargin is room left under the budget for protobuf framing.
const graphFrameMargin = 4 << 10

func (s *GraphServer) tupleWriter(send func(*savepointv1.GetCheckpointResponse) error) *tupleWriter {
	return &tupleWriter{budget: s.lim.ResponseBudgetBytes - graphFrameMargin, send: send}
}

func (w *tupleWriter) flush() error {
	if w.cur == nil {
		return nil
	}
	m := w.cur
	w.cur, w.size = nil, 0
	if err := w.send(m); err != nil {
		return errSend{err}
	}
	return nil
}

// room makes room for an item of n bytes, starting a new message when the
// current one cannot hold it.
func (w *tupleWriter) room(n int) error {
	if w.cur != nil && w.size+n > w.budget {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if w.cur == nil {
		w.cur = &savepointv1.GetCheckpointResponse{}
	}
	w.size += n
	return nil
}

func (w *tupleWriter) tuple(t *core.GraphTuple) error {
	if err := w.flush(); err != nil { // a checkpoint starts a message
		return err
	}
	c := t.Checkpoint
	pc := &savepointv1.GraphCheckpoint{
		ThreadId: c.ThreadID, CheckpointNs: c.NS, CheckpointId: c.ID, ParentCheckpointId: c.ParentID,
		Checkpoint:      &savepointv1.TypedValue{Type: c.Value.Type, TotalSize: c.Value.Size},
		ChannelVersions: c.ChannelVersions, MetadataJson: c.MetadataJSON,
	}
	if err := w.room(proto.Size(pc) + 16); err != nil {
		return err
	}
	w.cur.Checkpoint = pc
	if err := w.value(pc.Checkpoint, c.Value); err != nil {
		return err
	}
	for _, b := range t.Blobs {
		pb := &savepointv1.ChannelBlob{Channel: b.Channel, Version: b.Version, Value: &savepointv1.TypedValue{Type: b.Value.Type, TotalSize: b.Value.Size}}
		if err := w.room(proto.Size(pb) + 16); err != nil {
			return err
		}
		w.cur.Blobs = append(w.cur.Blobs, pb)
		if err := w.value(pb.Value, b.Value); err != nil {
			return err
		}
	}
	for _, x := range t.Writes {
		pw := &savepointv1.PendingWrite{TaskId: x.TaskID, TaskPath: x.TaskPath, Idx: x.Idx, Channel: x.Channel,
			Value: &savepointv1.TypedValue{Type: x.Value.Type, TotalSize: x.Value.Size}}
		if err := w.room(proto.Size(pw) + 16); err != nil {
			return err
		}
		w.cur.PendingWrites = append(w.cur.PendingWrites, pw)
		if err := w.value(pw.Value, x.Value); err != nil {
			return err
		}
	}
	return w.flush()
}

// value fills tv.Data, which the current message holds, with as much of v
// as fits, and sends the rest as value_chunk messages.
func (w *tupleWriter) value(tv *savepointv1.TypedValue, v core.GraphValue) error {
	inPrefix := true
	return v.Each(func(p []byte) error {
		for len(p) > 0 {
			free := w.budget - w.size
			if free <= 0 {
				if err := w.flush(); err != nil {
					return err
				}
				inPrefix = false
				w.cur = &savepointv1.GetCheckpointResponse{}
				free = w.budget
			}
			n := min(free, len(p))
			if inPrefix {
				tv.Data = append(tv.Data, p[:n]...)
			} else {
				w.cur.ValueChunk = append(w.cur.ValueChunk, p[:n]...)
			}
			w.size += n
			p = p[n:]
		}
		return nil
	})
}
