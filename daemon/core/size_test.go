package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// countingSizer answers its calls in turn from sizes and errs.
type countingSizer struct {
	calls int
	sizes []int64
	errs  []error
}

func (s *countingSizer) Size(context.Context) (int64, error) {
	i := s.calls
	s.calls++
	return s.sizes[i], s.errs[i]
}

func TestCachedSizer(t *testing.T) {
	broken := errors.New("catalog unreachable")
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		after []time.Duration // the clock at each call, from start
		calls int             // reads of the source expected
		last  int64           // the last call's size
		err   error           // the last call's error
	}{
		{"one call reads", []time.Duration{0}, 1, 10, nil},
		{"a call within the age reuses", []time.Duration{0, justUnder}, 1, 10, nil},
		{"a call at the age reads again", []time.Duration{0, core.SizeMaxAge}, 2, 20, broken},
		{"an error is kept for the age too", []time.Duration{0, core.SizeMaxAge, core.SizeMaxAge + justUnder}, 2, 20, broken},
		{"after the error, a fresh read", []time.Duration{0, core.SizeMaxAge, 2 * core.SizeMaxAge}, 3, 30, nil},
		{"a clock that went back reads again", []time.Duration{core.SizeMaxAge, 0}, 2, 20, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &countingSizer{sizes: []int64{10, 20, 30}, errs: []error{nil, broken, nil}}
			var now time.Time
			c := &core.CachedSizer{Source: src, Now: func() time.Time { return now }}
			var n int64
			var err error
			for _, d := range tc.after {
				now = start.Add(d)
				n, err = c.Size(context.Background())
			}
			if src.calls != tc.calls || n != tc.last || !errors.Is(err, tc.err) {
				t.Fatalf("source read %d times, last answer (%d, %v); want %d times, (%d, %v)", src.calls, n, err, tc.calls, tc.last, tc.err)
			}
		})
	}
}

// justUnder is a moment before a size goes stale.
const justUnder = core.SizeMaxAge - time.Millisecond
