package rpc

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ListThreads implements GraphCheckpointServiceServer. A page holds at most
// page_size threads (0 means 100, more than 1000 means 1000).
func (s *GraphServer) ListThreads(ctx context.Context, req *savepointv1.ListThreadsRequest) (*savepointv1.ListThreadsResponse, error) {
	if err := validatePageSize("page_size", req.GetPageSize()); err != nil {
		return nil, s.fail(ctx, err)
	}
	var after string
	if req.GetPageToken() != "" {
		var err error
		if after, err = decodeThreadsToken(req.GetPageToken()); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	size := pageSize(req.GetPageSize())
	threads, err := s.store.ListThreads(ctx, after, size+1)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.ListThreadsResponse{}
	for i, th := range threads {
		if i == size {
			resp.NextPageToken = threadsToken(threads[i-1].ThreadID).encode()
			break
		}
		p := &savepointv1.GraphThread{ThreadId: th.ThreadID}
		if !th.UpdateTime.IsZero() {
			p.UpdateTime = timestamppb.New(th.UpdateTime)
		}
		resp.Threads = append(resp.Threads, p)
	}
	return resp, nil
}
