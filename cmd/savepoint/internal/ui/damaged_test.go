package ui

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// damagedDaemon answers as a daemon whose session "bad" cannot be decoded
// (at epoch 3) does: a real store cannot be damaged from outside its
// package.
type damagedDaemon struct {
	savepointv1.UnimplementedSavepointServiceServer
	deletedAt atomic.Uint64
}

func corrupt() error {
	st, _ := status.New(codes.DataLoss, `session "bad": stored data cannot be decoded`).WithDetails(&errdetails.ErrorInfo{
		Reason: "CHECKPOINT_CORRUPT", Domain: "savepoint.v1", Metadata: map[string]string{"current_revision": "4", "current_epoch": "3"},
	})
	return st.Err()
}

func (s *damagedDaemon) ListSessions(context.Context, *savepointv1.ListSessionsRequest) (*savepointv1.ListSessionsResponse, error) {
	return &savepointv1.ListSessionsResponse{Sessions: []*savepointv1.SessionSummary{{SessionId: "bad"}}}, nil
}

func (s *damagedDaemon) GetSession(context.Context, *savepointv1.GetSessionRequest) (*savepointv1.GetSessionResponse, error) {
	return nil, corrupt()
}

func (s *damagedDaemon) Resume(context.Context, *savepointv1.ResumeRequest) (*savepointv1.ResumeResponse, error) {
	return nil, corrupt()
}

func (s *damagedDaemon) DeleteSession(_ context.Context, req *savepointv1.DeleteSessionRequest) (*savepointv1.DeleteSessionResponse, error) {
	s.deletedAt.Store(req.GetEpoch())
	return &savepointv1.DeleteSessionResponse{TombstoneEpoch: req.GetEpoch()}, nil
}

// TestDamagedSession: a session whose data cannot be read is listed as
// damaged with a delete link; its page is a 500 naming CHECKPOINT_CORRUPT
// with the same link; the delete, taken over, goes under the epoch the
// error carries.
func TestDamagedSession(t *testing.T) {
	sock := daemontest.SocketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &damagedDaemon{}
	gs := grpc.NewServer()
	savepointv1.RegisterSavepointServiceServer(gs, fake)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c, err := client.Dial(t.Context(), "unix:"+sock, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _ := New(Options{Client: c, Token: testToken})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(ts.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: cookieName(u.Host), Value: testToken}})
	hc := &http.Client{Jar: jar}

	_, body := fetch(t, hc, ts.URL+"/sessions")
	wantText(t, "sessions", body, "bad damaged delete")
	code, body := fetch(t, hc, ts.URL+"/sessions/bad")
	if code != 500 || !strings.Contains(body, `href="/sessions/bad/delete"`) {
		t.Errorf("damaged session page: %d %s", code, text(body))
	}
	wantText(t, "damaged session page", body, "CHECKPOINT_CORRUPT (DataLoss)", "cannot be read, so it cannot be shown or resumed")
	if code, body := fetch(t, hc, ts.URL+"/sessions/bad/delete"); code != 200 || !strings.Contains(text(body), "The session's epoch is now 3.") {
		t.Errorf("delete confirmation: %d %s", code, text(body))
	}
	code, body = submit(t, s, hc, ts.URL, "/sessions/bad/delete", url.Values{"own": {"take-over"}})
	if code != 200 || fake.deletedAt.Load() != 3 {
		t.Errorf("delete: %d, deleted under epoch %d, want 3: %s", code, fake.deletedAt.Load(), text(body))
	}
}
