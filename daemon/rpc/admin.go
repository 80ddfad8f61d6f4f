package rpc

import (
	"context"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// backupChunk is the most file bytes one BackupResponse carries.
const backupChunk = 1 << 20

// Backup implements SavepointServiceServer: it streams the store's backup
// file in chunks of at most 1 MiB, the last response carrying the next
// since version and whether the file is encrypted.
func (s *Server) Backup(req *savepointv1.BackupRequest, stream savepointv1.SavepointService_BackupServer) error {
	ctx := stream.Context()
	w := &chunkSender{send: func(b []byte) error { return stream.Send(&savepointv1.BackupResponse{Data: b}) }}
	res, err := s.store.BackupSince(ctx, w, req.GetSinceVersion(), req.GetPlaintext())
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return s.fail(ctx, err)
	}
	return stream.Send(&savepointv1.BackupResponse{NextSinceVersion: res.Next, Encrypted: res.Encrypted})
}

// chunkSender buffers writes into chunks of backupChunk bytes for send.
type chunkSender struct {
	send func([]byte) error
	buf  []byte
}

func (c *chunkSender) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := backupChunk - len(c.buf)
		take := min(room, len(p))
		c.buf = append(c.buf, p[:take]...)
		p = p[take:]
		if len(c.buf) == backupChunk {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (c *chunkSender) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.send(c.buf)
	c.buf = nil // Send keeps no reference once it returns, but a new buffer is cheap
	return err
}

// DeleteSession implements SavepointServiceServer.
func (s *Server) DeleteSession(ctx context.Context, req *savepointv1.DeleteSessionRequest) (*savepointv1.DeleteSessionResponse, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	epoch, err := s.store.DeleteSession(ctx, req.GetSessionId(), req.GetEpoch())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.DeleteSessionResponse{TombstoneEpoch: epoch}, nil
}

// Verify implements SavepointServiceServer.
func (s *Server) Verify(ctx context.Context, _ *savepointv1.VerifyRequest) (*savepointv1.VerifyResponse, error) {
	rep, err := s.store.Verify(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return VerifyReportToProto(rep), nil
}

// GetServerInfo implements SavepointServiceServer: the version and commit,
// the store's kind, format, location and size, the limits of the
// configuration the server runs with, its uptime and counters.
func (s *Server) GetServerInfo(ctx context.Context, _ *savepointv1.GetServerInfoRequest) (*savepointv1.GetServerInfoResponse, error) {
	info := s.store.Info()
	resp := &savepointv1.GetServerInfoResponse{
		Version:                 s.version,
		Commit:                  s.commit,
		StoreKind:               info.Kind,
		StoreFormat:             info.Format,
		StoreLocation:           info.Location,
		MaxRequestBytes:         int64(s.lim.MaxRequestBytes),
		MaxMessageBytes:         int64(s.lim.MaxMessageBytes),
		MaxStateBytes:           int64(s.lim.MaxStateBytes),
		ResponseBudgetBytes:     int64(s.lim.ResponseBudgetBytes),
		StartTime:               timestamppb.New(s.start),
		Uptime:                  durationpb.New(time.Since(s.start)),
		Saves:                   s.saves.Load(),
		Commits:                 info.Commits,
		StartedOnDemand:         s.onDemand,
		Pid:                     uint32(os.Getpid()),
		CallStreamMaxInFlight:   uint32(s.inFlight),
		CallStreamGetCheckpoint: s.inFlight > 0,
	}
	if s.size != nil {
		if n, err := s.size.Size(ctx); err == nil {
			resp.StoreBytes = &n
		}
	}
	return resp, nil
}
