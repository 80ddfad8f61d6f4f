package graphtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// listThreads pages through ListThreads with pageSize and returns every
// thread, checking that no page is larger than asked.
func listThreads(t *testing.T, e *Env, pageSize int32) []*savepointv1.GraphThread {
	t.Helper()
	var out []*savepointv1.GraphThread
	for token, pages := "", 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("ListThreads never ends")
		}
		resp, err := e.Graph.ListThreads(ctx, &savepointv1.ListThreadsRequest{PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("ListThreads: %v", err)
		}
		if pageSize > 0 && len(resp.GetThreads()) > int(pageSize) {
			t.Fatalf("a page of %d threads, asked for %d", len(resp.GetThreads()), pageSize)
		}
		out = append(out, resp.GetThreads()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

func threadIDs(ts []*savepointv1.GraphThread) []string {
	var out []string
	for _, th := range ts {
		out = append(out, th.GetThreadId())
	}
	return out
}

// testListThreads checks ListThreads: every thread holding a checkpoint, in
// byte order, once, over pages of any size, with its last write's time; a
// deleted thread (whose tombstone stays) and one holding only writes are
// not listed; bad page sizes and tokens are refused.
func testListThreads(t *testing.T, e *Env) {
	before := time.Now()
	threads := []string{"b", "a", "a.1", "A", "a:2", "z"}
	for _, th := range threads {
		mustPut(t, e, cp(th, "", "1", "", "{}", nil))
	}
	mustPut(t, e, cp("a", "child:1", "1", "", "{}", nil)) // a second namespace: still one thread
	mustPut(t, e, cp("gone", "", "1", "", "{}", nil))
	if _, err := e.Graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: "gone"}); err != nil {
		t.Fatal(err)
	}
	mustWrites(t, e, "writes-only", "", "1", "task", "", cw(0, "a", "1"))
	want := slices.Sorted(slices.Values(threads))
	for _, size := range []int32{0, 1, 2, 5, 1000} {
		got := listThreads(t, e, size)
		if g := threadIDs(got); !slices.Equal(g, want) {
			t.Fatalf("page size %d: threads %q, want %q", size, g, want)
		}
		for _, th := range got {
			if ut := th.GetUpdateTime().AsTime(); ut.Before(before.Add(-time.Second)) || ut.After(time.Now().Add(time.Second)) {
				t.Fatalf("thread %s: update time %v, not about now", th.GetThreadId(), ut)
			}
		}
	}
	// More threads than the default page of 100.
	for i := range 150 {
		mustPut(t, e, cp(fmt.Sprintf("m%03d", i), "", "1", "", "{}", nil))
	}
	resp, err := e.Graph.ListThreads(ctx, &savepointv1.ListThreadsRequest{})
	if err != nil || len(resp.GetThreads()) != 100 || resp.GetNextPageToken() == "" {
		t.Fatalf("default page: %d threads, token %q, %v", len(resp.GetThreads()), resp.GetNextPageToken(), err)
	}
	if n := len(listThreads(t, e, 0)); n != len(threads)+150 {
		t.Fatalf("%d threads in all, want %d", n, len(threads)+150)
	}

	_, err = e.Graph.ListThreads(ctx, &savepointv1.ListThreadsRequest{PageSize: -1})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_SIZE", "page_size")
	_, err = e.Graph.ListThreads(ctx, &savepointv1.ListThreadsRequest{PageToken: "garbage!"})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN", "")
	// A ListSessions token is not a ListThreads token.
	for _, id := range []string{"s1", "s2"} {
		if _, err := e.Sessions.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := e.Sessions.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 1})
	if err != nil || ls.GetNextPageToken() == "" {
		t.Fatalf("ListSessions: %v, token %q", err, ls.GetNextPageToken())
	}
	_, err = e.Graph.ListThreads(ctx, &savepointv1.ListThreadsRequest{PageToken: ls.GetNextPageToken()})
	wantReason(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN", "")
}
