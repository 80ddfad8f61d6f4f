package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// failingOver answers every call NO_WRITABLE_HOST (UNAVAILABLE) until
// until, as savepointd does while its database fails over, then as the
// fake does; it counts the calls.
type failingOver struct {
	*fake
	mu    sync.Mutex
	until time.Time
	calls map[string]int
}

func (f *failingOver) down(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if time.Now().Before(f.until) {
		return infoErr(codes.Unavailable, "NO_WRITABLE_HOST", nil)
	}
	return nil
}

func (f *failingOver) SaveCheckpoint(ctx context.Context, req *savepointv1.SaveCheckpointRequest) (*savepointv1.SaveCheckpointResponse, error) {
	if err := f.down("save"); err != nil {
		return nil, err
	}
	return f.fake.SaveCheckpoint(ctx, req)
}

func (f *failingOver) DeleteSession(ctx context.Context, req *savepointv1.DeleteSessionRequest) (*savepointv1.DeleteSessionResponse, error) {
	if err := f.down("delete"); err != nil {
		return nil, err
	}
	return f.fake.DeleteSession(ctx, req)
}

// TestRetryBudget: while the daemon answers NO_WRITABLE_HOST for 2.5 s (a
// failover of its database), a retry-safe call (a save with a request id)
// made at its start succeeds under a policy whose Budget outlasts it,
// though its MaxAttempts alone would give up after about 0.3 s; with no
// Budget it fails then, and a call that is not retry-safe fails at once
// either way. The default policy's Budget covers `make failover`'s
// longest time without a writable host.
func TestRetryBudget(t *testing.T) {
	const outage = 2500 * time.Millisecond
	base := RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	withBudget := base
	withBudget.Budget = 5 * time.Second
	for _, tc := range []struct {
		name   string
		policy RetryPolicy
		ok     bool
	}{{"budget", withBudget, true}, {"attempts only", base, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failingOver{fake: newFake(), calls: map[string]int{}}
			c := serve(t, f, WithRetry(tc.policy))
			f.until = time.Now().Add(outage)
			start := time.Now()
			_, err := c.Raw().SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "s", RequestId: "00000000-0000-4000-8000-000000000001"})
			took := time.Since(start)
			switch {
			case tc.ok && (err != nil || took < outage):
				t.Fatalf("a save during the failover: %v after %v; want success after the %v outage", err, took, outage)
			case !tc.ok && (!errors.Is(err, ErrNoWritableHost) || took > time.Second):
				t.Fatalf("a save during the failover: %v after %v; want ErrNoWritableHost within a second", err, took)
			}
			f.until = time.Now().Add(outage)
			start = time.Now()
			if _, err := c.Raw().DeleteSession(t.Context(), &savepointv1.DeleteSessionRequest{SessionId: "s"}); !errors.Is(err, ErrNoWritableHost) || time.Since(start) > time.Second {
				t.Fatalf("a delete during the failover: %v after %v; want ErrNoWritableHost at once", err, time.Since(start))
			}
			if n := f.calls["delete"]; n != 1 {
				t.Errorf("the delete was tried %d times, want once", n)
			}
		})
	}
	if DefaultRetryPolicy.Budget < 8300*time.Millisecond {
		t.Errorf("DefaultRetryPolicy.Budget is %v: shorter than the longest time without a writable host `make failover` measured (8.3 s)", DefaultRetryPolicy.Budget)
	}
}
