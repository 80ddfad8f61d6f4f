package migrate

import (
	"context"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
)

// copyGraph copies every graph thread of the source, one transaction per
// thread, and checks that every graph record the source holds was copied.
func (m *migration) copyGraph(ctx context.Context, info badgerstore.ExportInfo) error {
	g := &m.rep.Graph
	last := time.Now()
	err := m.cfg.Source.ExportGraph(ctx, func(d *core.GraphThreadDump) error {
		if err := m.cfg.Target.ImportGraphThread(ctx, d); err != nil {
			return fmt.Errorf("graph thread %q: %w", d.ThreadID, err)
		}
		g.Threads++
		if d.Deleted && len(d.Checkpoints)+len(d.Blobs)+len(d.Writes)+len(d.Effects) == 0 {
			g.Tombstones++
		}
		g.Checkpoints += len(d.Checkpoints)
		g.Blobs += len(d.Blobs)
		g.Writes += len(d.Writes)
		g.Requests += len(d.Requests)
		g.Effects += len(d.Effects)
		for _, c := range d.Checkpoints {
			g.Bytes += c.Value.Size
		}
		for _, b := range d.Blobs {
			g.Bytes += b.Value.Size
		}
		for _, w := range d.Writes {
			g.Bytes += w.Value.Size
		}
		for _, e := range d.Effects {
			g.Bytes += e.Output.Size
		}
		if time.Since(last) >= time.Second || g.Threads == info.GraphThreads {
			last = time.Now()
			m.progress("copied %d/%d graph threads (%d checkpoints, %d MiB of values)", g.Threads, info.GraphThreads, g.Checkpoints, g.Bytes>>20)
		}
		return nil
	})
	if err != nil {
		return m.copyFailed(g.Threads, "graph threads", err)
	}
	// A record outside every thread's head would be left behind.
	for _, c := range []struct {
		what           string
		stored, copied int
	}{
		{"graph threads", info.GraphThreads, g.Threads}, {"graph checkpoints", info.GraphCheckpoints, g.Checkpoints},
		{"graph blobs", info.GraphBlobs, g.Blobs}, {"graph pending writes", info.GraphWrites, g.Writes},
		{"graph request ids", info.GraphRequests, g.Requests}, {"graph ledger entries", info.GraphEffects, g.Effects},
	} {
		if c.stored != c.copied {
			return fmt.Errorf("verification failed: %s holds %d %s, %d were copied (the copy in %s must not be served)", m.cfg.SourceName, c.stored, c.what, c.copied, m.cfg.TargetName)
		}
	}
	return nil
}

// CompareGraph reads every graph thread again from cfg's two stores and
// compares them: record by record (heads, checkpoints, blobs, pending
// writes, request ids and ledger entries, every value's bytes), then
// through core.GraphStore (every checkpoint tuple listed, each namespace's
// latest, and the ledger listed). It returns nil when they are equal and
// the target holds the threads it was given, the number Run copied;
// otherwise an error naming the first thread and record that differ.
func CompareGraph(ctx context.Context, cfg Config, threads int) error {
	m := &migration{cfg: cfg}
	n := 0
	last := time.Now()
	err := cfg.Source.ExportGraph(ctx, func(want *core.GraphThreadDump) error {
		wl, err := storecompare.GraphRecordDigests(want)
		if err != nil {
			return fmt.Errorf("graph thread %q: source: %w", want.ThreadID, err)
		}
		var gl []string
		found, err := cfg.Target.ReadGraphThread(ctx, want.ThreadID, func(got *core.GraphThreadDump) error {
			gl, err = storecompare.GraphRecordDigests(got)
			return err
		})
		if err != nil || !found {
			return fmt.Errorf("graph thread %q: not read back (found %v): %v", want.ThreadID, found, err)
		}
		if err := storecompare.GraphRecords(want.ThreadID, wl, gl); err != nil {
			return err
		}
		if err := storecompare.GraphReads(ctx, cfg.Source, cfg.Target, want); err != nil {
			return err
		}
		n++
		if time.Since(last) >= time.Second || n == threads {
			last = time.Now()
			m.progress("compared %d/%d graph threads", n, threads)
		}
		return nil
	})
	if err == nil && n != threads {
		err = fmt.Errorf("%d graph threads read back, %d copied", n, threads)
	}
	if err != nil {
		return fmt.Errorf("verification failed: %w (the copy in %s must not be served)", err, cfg.TargetName)
	}
	return nil
}
