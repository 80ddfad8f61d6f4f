package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Scenario 5: start with many sessions

// Startup times savepointd from exec to SERVING on a copy of a store of
// StartSessions sessions holding StartBytes of messages, built once and kept
// in the cache directory.
func (b *Bench) Startup(ctx context.Context) error {
	fixture, err := b.fixture(ctx)
	if err != nil {
		return fmt.Errorf("building the %d-session store: %w", b.cfg.StartSessions, err)
	}
	d, err := b.dir()
	if err != nil {
		return err
	}
	data := filepath.Join(d, "data")
	if err := os.CopyFS(data, os.DirFS(fixture)); err != nil {
		return fmt.Errorf("copying the fixture: %w", err)
	}
	size, err := dirSize(data)
	if err != nil {
		return err
	}
	var took []float64
	for range max(b.cfg.Reps, 3) {
		dm, err := StartDaemon(ctx, b.cfg.Savepointd, data, d)
		if err != nil {
			return err
		}
		took = append(took, ms(dm.Started))
		err = checkFixture(ctx, dm, b.cfg.StartSessions)
		if err := errors.Join(err, dm.Stop()); err != nil {
			return err
		}
	}
	t := &Table{
		Title:  fmt.Sprintf("5b. savepointd start to serving, %d sessions stored (%.0f MiB on disk)", b.cfg.StartSessions, float64(size)/mib),
		Header: []string{"ms (median)", "min ms", "max ms"},
		Notes: []string{fmt.Sprintf("From exec to the first health check answering SERVING (polled every 5 ms by client.WaitServing), %d starts on one copy of the cached store (page cache warm), each stopped with SIGTERM; each session holds %d messages of %d bytes (%.0f MiB of messages in all).",
			len(took), b.startMessages(), b.cfg.MessageBytes, float64(int64(b.startMessages()*b.cfg.MessageBytes)*int64(b.cfg.StartSessions))/mib)},
	}
	t.Add(Median(took), slices.Min(took), slices.Max(took))
	b.tables = append(b.tables, t)
	b.summary["startup_100k_ms"] = Median(took)
	if b.cfg.Savepoint == "" {
		return nil
	}
	dm, err := StartDaemon(ctx, b.cfg.Savepointd, data, d)
	if err != nil {
		return err
	}
	return errors.Join(b.inspector(ctx, dm, b.cfg.Savepoint), dm.Stop())
}

func fixtureSessionID(i int) string { return fmt.Sprintf("fixture-%06d", i) }

// startMessages is how many messages each session of the start-up store
// holds: enough for StartBytes in all, at least one.
func (b *Bench) startMessages() int {
	per := int64(b.cfg.StartSessions) * int64(b.cfg.MessageBytes)
	return int(max(1, (b.cfg.StartBytes+per-1)/per))
}

// checkFixture confirms the daemon serves the store's last session.
func checkFixture(ctx context.Context, d *Daemon, n int) error {
	conn, err := d.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = savepointv1.NewSavepointServiceClient(conn).GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: fixtureSessionID(n - 1)})
	if err != nil {
		return fmt.Errorf("the started daemon does not serve the fixture's last session: %w", err)
	}
	return nil
}

// fixture returns the cached store of StartSessions sessions, building it
// through savepointd when it is missing. The cache is keyed by the store's
// format version and the session count; a build that did not finish is
// never used.
func (b *Bench) fixture(ctx context.Context) (string, error) {
	dir := filepath.Join(b.cfg.CacheDir, fmt.Sprintf("sessions-%d-%dx%db-format%d", b.cfg.StartSessions, b.startMessages(), b.cfg.MessageBytes, badgerstore.FormatVersion))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return filepath.Join(dir, "data"), nil
	}
	b.log("scenario 5: building the %d-session store of %d messages each in %s (once; later runs reuse it)", b.cfg.StartSessions, b.startMessages(), dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	sock, err := b.dir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	d, err := StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(dir, "data"), sock)
	if err != nil {
		return "", err
	}
	const workers = 64
	next := atomic.Int64{}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), b.rng.Uint64()))
		wg.Go(func() {
			conn, err := d.Dial()
			if err != nil {
				errs[w] = err
				return
			}
			defer conn.Close()
			c := savepointv1.NewSavepointServiceClient(conn)
			for {
				i := int(next.Add(1)) - 1
				if i >= b.cfg.StartSessions || ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				msgs := make([]*savepointv1.Message, b.startMessages())
				for j := range msgs {
					msgs[j] = textMessage(rng, "user", b.cfg.MessageBytes)
				}
				if _, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
					SessionId: fixtureSessionID(i), RequestId: uuid.NewString(), Task: benchTask,
					AppendMessages: msgs,
				}); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, d.Stop())...); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o600); err != nil {
		return "", err
	}
	return filepath.Join(dir, "data"), nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
