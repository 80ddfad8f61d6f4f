package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// damagedServer answers as a daemon whose session "bad" cannot be decoded
// (at epoch 3) does: a real store cannot be damaged from outside its
// package, so this shows what the CLI makes of those answers.
type damagedServer struct {
	savepointv1.UnimplementedSavepointServiceServer
	deletedAt atomic.Uint64
}

func corruptErr() error {
	st, _ := status.New(codes.DataLoss, `session "bad": stored data cannot be decoded`).WithDetails(&errdetails.ErrorInfo{
		Reason: "CHECKPOINT_CORRUPT", Domain: "savepoint.v1", Metadata: map[string]string{"current_revision": "4", "current_epoch": "3"},
	})
	return st.Err()
}

func (s *damagedServer) ListSessions(context.Context, *savepointv1.ListSessionsRequest) (*savepointv1.ListSessionsResponse, error) {
	return &savepointv1.ListSessionsResponse{Sessions: []*savepointv1.SessionSummary{
		{SessionId: "bad"},
		{SessionId: "good", Revision: 2, Epoch: 1, Turn: 1, PendingToolUseCount: 1, UpdateTime: timestamppb.Now()},
	}}, nil
}

func (s *damagedServer) GetSession(context.Context, *savepointv1.GetSessionRequest) (*savepointv1.GetSessionResponse, error) {
	return nil, corruptErr()
}

func (s *damagedServer) Resume(context.Context, *savepointv1.ResumeRequest) (*savepointv1.ResumeResponse, error) {
	return nil, corruptErr()
}

func (s *damagedServer) DeleteSession(_ context.Context, req *savepointv1.DeleteSessionRequest) (*savepointv1.DeleteSessionResponse, error) {
	s.deletedAt.Store(req.GetEpoch())
	return &savepointv1.DeleteSessionResponse{TombstoneEpoch: req.GetEpoch()}, nil
}

func (s *damagedServer) Verify(context.Context, *savepointv1.VerifyRequest) (*savepointv1.VerifyResponse, error) {
	return &savepointv1.VerifyResponse{CheckedSessions: 2, CheckedRecords: 9, DamagedSessions: []*savepointv1.DamagedSession{
		{SessionId: "bad", Problem: "revision 4: checksum mismatch\n(value 0x1f)"},
		{Problem: "format record missing"},
	}}, nil
}

func TestDamagedSessions(t *testing.T) {
	sock := daemontest.SocketPath(t)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &damagedServer{}
	savepointv1.RegisterSavepointServiceServer(srv, fake)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	addr := "unix:" + sock

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"damaged-ls", []string{"ls"}},
		{"damaged-show", []string{"show", "bad"}},
		{"damaged-export", []string{"export", "bad"}},
		{"damaged-verify", []string{"verify"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--addr", addr}, tc.args...)...)
			var b strings.Builder
			b.WriteString("$ savepoint " + strings.Join(tc.args, " ") + "\n" + r.stdout)
			if r.stderr != "" {
				b.WriteString("[stderr]\n" + r.stderr)
			}
			fmt.Fprintf(&b, "[exit %d]\n", r.code)
			checkGolden(t, tc.name, normalize(b.String(), sock))
		})
	}
	// --take-over deletes a session that cannot be resumed under the epoch
	// its error reports.
	r := runCLI(t, "--addr", addr, "rm", "bad", "--take-over")
	if r.code != exitOK || fake.deletedAt.Load() != 3 {
		t.Errorf("rm --take-over of a damaged session: exit %d, deleted at epoch %d, stderr %q; want 0 at epoch 3", r.code, fake.deletedAt.Load(), r.stderr)
	}
}
