package client

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// GetSession reads a kept revision of a session (0 means the latest) without
// taking ownership, and returns it with its whole history in Messages,
// paging through ListMessages. A missing session is ErrSessionNotFound, a revision
// that is not kept ErrRevisionNotFound.
func (c *Client) GetSession(ctx context.Context, id string, revision uint64) (*savepointv1.Checkpoint, error) {
	req := &savepointv1.GetSessionRequest{SessionId: id}
	if revision != 0 {
		req.Revision = &revision
	}
	r, err := c.raw.GetSession(ctx, req)
	if err != nil {
		return nil, err
	}
	cp := r.GetCheckpoint()
	if err := c.loadHistory(ctx, cp, r.GetNextPageToken()); err != nil {
		return nil, err
	}
	return cp, nil
}

// loadHistory appends to cp.Messages the rest of its revision's history,
// from the ListMessages page token on, and checks that it is complete.
func (c *Client) loadHistory(ctx context.Context, cp *savepointv1.Checkpoint, token string) error {
	id := cp.GetSessionId()
	for token != "" {
		page, err := c.raw.ListMessages(ctx, &savepointv1.ListMessagesRequest{
			SessionId: id, Revision: cp.GetRevision(), PageToken: token,
		})
		if err != nil {
			return fmt.Errorf("savepoint: loading the history of %q: %w", id, err)
		}
		if page.GetFirstIndex() != uint64(len(cp.Messages)) || (len(page.GetMessages()) == 0 && page.GetNextPageToken() != "") {
			return fmt.Errorf("savepoint: loading the history of %q: page at index %d with %d messages after %d loaded",
				id, page.GetFirstIndex(), len(page.GetMessages()), len(cp.Messages))
		}
		cp.Messages = append(cp.Messages, page.GetMessages()...)
		token = page.GetNextPageToken()
	}
	if uint64(len(cp.Messages)) != cp.GetMessageCount() {
		return fmt.Errorf("savepoint: loading the history of %q: got %d messages, revision %d has %d",
			id, len(cp.Messages), cp.GetRevision(), cp.GetMessageCount())
	}
	return nil
}

// ReconcileView returns what Reconcile decides for each pending tool use of
// the session's latest revision, every page of resolutions in one response
// (NextPageToken empty). Like the RPC, it writes and runs nothing.
func (c *Client) ReconcileView(ctx context.Context, id string) (*savepointv1.ReconcileResponse, error) {
	out := &savepointv1.ReconcileResponse{}
	for token, first := "", true; first || token != ""; first = false {
		page, err := c.raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: id, PageToken: token})
		if err != nil {
			return nil, err
		}
		if !first && page.GetRevision() != out.Revision {
			return nil, fmt.Errorf("savepoint: reconciling %q: page of revision %d after revision %d", id, page.GetRevision(), out.Revision)
		}
		out.Revision = page.GetRevision()
		out.Resolutions = append(out.Resolutions, page.GetResolutions()...)
		token = page.GetNextPageToken()
	}
	return out, nil
}

// ListSessions returns every live session whose labels include each pair of
// labelFilter (nil: all), in session id order, paging through ListSessions.
func (c *Client) ListSessions(ctx context.Context, labelFilter map[string]string) ([]*savepointv1.SessionSummary, error) {
	return c.ListSessionsMatching(ctx, &savepointv1.ListSessionsRequest{LabelFilter: labelFilter})
}

// ListSessionsMatching returns every live session that the filters of
// filter select (labels, status, pending tool uses, min_idle), in session id
// order, paging through ListSessions; filter's page_size and page_token are
// ignored, and filter is not changed.
func (c *Client) ListSessionsMatching(ctx context.Context, filter *savepointv1.ListSessionsRequest) ([]*savepointv1.SessionSummary, error) {
	req := proto.CloneOf(filter)
	req.PageSize = 1000
	var out []*savepointv1.SessionSummary
	for token, first := "", true; first || token != ""; first = false {
		req.PageToken = token
		page, err := c.raw.ListSessions(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, page.GetSessions()...)
		token = page.GetNextPageToken()
	}
	return out, nil
}
