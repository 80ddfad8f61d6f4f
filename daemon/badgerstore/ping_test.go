package badgerstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestPing checks the liveness probe the systemd watchdog relies on: it
// passes through the commit queue without committing or syncing, passes on
// a full disk, and fails when a commit is stuck, the store failed, or closed.
func TestPing(t *testing.T) {
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 200*time.Millisecond) }

	t.Run("writes nothing", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer s.Close()
		saveN(t, s, "p", 1)
		var syncs atomic.Int32
		sync0 := s.eng.sync
		s.eng.sync = func() error { syncs.Add(1); return sync0() }
		before := s.Stats()
		for range 10 {
			if err := s.Ping(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if after := s.Stats(); after != before || syncs.Load() != 0 {
			t.Fatalf("10 pings moved the stats from %+v to %+v with %d syncs; want no commit or sync", before, after, syncs.Load())
		}
	})

	t.Run("disk full", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer s.Close()
		s.eng.statfs = func(string) (uint64, error) { return 0, nil }
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "full"}); !errors.Is(err, core.ErrDiskFull) {
			t.Fatalf("save on a full disk: %v, want ErrDiskFull", err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("ping on a full disk: %v, want nil", err)
		}
	})

	t.Run("stuck commit", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer s.Close()
		entered, release := make(chan struct{}), make(chan struct{})
		sync0 := s.eng.sync
		s.eng.sync = func() error {
			close(entered)
			<-release
			return sync0()
		}
		saved := make(chan error, 1)
		go func() {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "stuck"})
			saved <- err
		}()
		<-entered
		c, cancel := short()
		err := s.Ping(c)
		cancel()
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("ping while a sync hangs: %v, want ErrUnavailable", err)
		}
		close(release)
		if err := <-saved; err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("ping once the sync returned: %v", err)
		}
	})

	t.Run("failed", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer s.Close()
		s.eng.sync = func() error { return errors.New("EIO") }
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "lost"}); err == nil {
			t.Fatal("save whose sync failed succeeded")
		}
		if err := s.Ping(ctx); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("ping after a storage failure: %v, want ErrUnavailable", err)
		}
	})

	t.Run("closed", func(t *testing.T) {
		s := openT(t, t.TempDir())
		s.Close()
		c, cancel := short()
		defer cancel()
		if err := s.Ping(c); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("ping after Close: %v, want ErrUnavailable", err)
		}
	})
}
