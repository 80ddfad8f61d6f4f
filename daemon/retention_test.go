package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

func TestRetentionInterval(t *testing.T) {
	for _, tc := range []struct{ retain, want time.Duration }{
		{time.Second, time.Second},
		{30 * time.Second, 3 * time.Second},
		{24 * time.Hour, time.Hour},
		{720 * time.Hour, time.Hour},
	} {
		if got := retentionInterval(tc.retain); got != tc.want {
			t.Errorf("retentionInterval(%v) = %v, want %v", tc.retain, got, tc.want)
		}
	}
}

// fakeSweeper records the cutoffs it is called with and fails the first
// call.
type fakeSweeper struct {
	mu      sync.Mutex
	cutoffs []time.Time
	calls   chan struct{}
}

func (f *fakeSweeper) DeleteIdleThreads(ctx context.Context, cutoff time.Time) (int, error) {
	f.mu.Lock()
	f.cutoffs = append(f.cutoffs, cutoff)
	n := len(f.cutoffs)
	f.mu.Unlock()
	f.calls <- struct{}{}
	if n == 1 {
		return 0, errors.New("disk hiccup")
	}
	return 1, nil
}

func TestSweepIdle(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	f := &fakeSweeper{calls: make(chan struct{}, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepIdle(ctx, f, time.Hour, 5*time.Millisecond, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	// A failed sweep does not stop the next ones.
	for range 3 {
		select {
		case <-f.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("fewer than 3 sweeps in 10s")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("sweepIdle did not return after its context was cancelled")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.cutoffs {
		if !c.Equal(now.Add(-time.Hour)) {
			t.Errorf("sweep %d: cutoff %v, want %v", i, c, now.Add(-time.Hour))
		}
	}
}

func TestStartRetentionOff(t *testing.T) {
	// Zero RetainIdle starts nothing: stop returns at once, with a nil store.
	startRetention(Config{}, nil, slog.Default())()
}
