package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
)

// graphCopied counts what copyGraph copied.
type graphCopied struct {
	threads, tombs, checkpoints, blobs, writes, requests, effects int
	bytes                                                         int64
}

// copyGraph copies every graph thread of the source, one transaction per
// thread, and checks that every graph record the source holds was copied.
func (m *migration) copyGraph(ctx context.Context, info badgerstore.ExportInfo) int {
	target := redactURL(m.cfg.To)
	g := &m.graph
	last := time.Now()
	err := m.src.ExportGraph(ctx, func(d *core.GraphThreadDump) error {
		if err := m.dst.ImportGraphThread(ctx, d); err != nil {
			return fmt.Errorf("graph thread %q: %w", d.ThreadID, err)
		}
		g.threads++
		if d.Deleted && len(d.Checkpoints)+len(d.Blobs)+len(d.Writes)+len(d.Effects) == 0 {
			g.tombs++
		}
		g.checkpoints += len(d.Checkpoints)
		g.blobs += len(d.Blobs)
		g.writes += len(d.Writes)
		g.requests += len(d.Requests)
		g.effects += len(d.Effects)
		for _, c := range d.Checkpoints {
			g.bytes += c.Value.Size
		}
		for _, b := range d.Blobs {
			g.bytes += b.Value.Size
		}
		for _, w := range d.Writes {
			g.bytes += w.Value.Size
		}
		for _, e := range d.Effects {
			g.bytes += e.Output.Size
		}
		if time.Since(last) >= time.Second || g.threads == info.GraphThreads {
			last = time.Now()
			fmt.Fprintf(m.stderr, "savepointd migrate-store: copied %d/%d graph threads (%d checkpoints, %d MiB of values)\n",
				g.threads, info.GraphThreads, g.checkpoints, g.bytes>>20)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: copy stopped after %d graph threads: %v\n", g.threads, err)
		fmt.Fprintf(m.stderr, "savepointd migrate-store: the sessions and threads copied so far stay in %s; drop schema %q and run migrate-store again\n", target, pgstore.DefaultSchema)
		if errors.Is(err, pgstore.ErrThreadExists) {
			return exitData
		}
		return exitFail
	}
	// A record outside every thread's head would be left behind.
	for _, c := range []struct {
		what           string
		stored, copied int
	}{
		{"graph threads", info.GraphThreads, g.threads}, {"graph checkpoints", info.GraphCheckpoints, g.checkpoints},
		{"graph blobs", info.GraphBlobs, g.blobs}, {"graph pending writes", info.GraphWrites, g.writes},
		{"graph request ids", info.GraphRequests, g.requests}, {"graph ledger entries", info.GraphEffects, g.effects},
	} {
		if c.stored != c.copied {
			return m.fail("verification failed: %s holds %d %s, %d were copied (the copy in %s must not be served)", m.cfg.DataDir, c.stored, c.what, c.copied, target)
		}
	}
	return exitOK
}

// compareGraph reads every graph thread again from both stores and
// compares them: record by record (heads, checkpoints, blobs, pending
// writes, request ids and ledger entries, every value's bytes), then
// through core.GraphStore (every checkpoint tuple listed, each namespace's
// latest, and the ledger listed).
func (m *migration) compareGraph(ctx context.Context) int {
	target := redactURL(m.cfg.To)
	n := 0
	last := time.Now()
	err := m.src.ExportGraph(ctx, func(want *core.GraphThreadDump) error {
		wl, err := storecompare.GraphRecordDigests(want)
		if err != nil {
			return fmt.Errorf("graph thread %q: source: %w", want.ThreadID, err)
		}
		var gl []string
		found, err := m.dst.ReadGraphThread(ctx, want.ThreadID, func(got *core.GraphThreadDump) error {
			gl, err = storecompare.GraphRecordDigests(got)
			return err
		})
		if err != nil || !found {
			return fmt.Errorf("graph thread %q: not read back (found %v): %v", want.ThreadID, found, err)
		}
		if err := storecompare.GraphRecords(want.ThreadID, wl, gl); err != nil {
			return err
		}
		if err := storecompare.GraphReads(ctx, m.src, m.dst, want); err != nil {
			return err
		}
		n++
		if time.Since(last) >= time.Second || n == m.graph.threads {
			last = time.Now()
			fmt.Fprintf(m.stderr, "savepointd migrate-store: compared %d/%d graph threads\n", n, m.graph.threads)
		}
		return nil
	})
	if err == nil && n != m.graph.threads {
		err = fmt.Errorf("%d graph threads read back, %d copied", n, m.graph.threads)
	}
	if err != nil {
		return m.fail("verification failed: %v (the copy in %s must not be served)", err, target)
	}
	return exitOK
}
