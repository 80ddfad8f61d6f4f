// Package migrate copies an embedded store (badgerstore) into a PostgreSQL
// one (pgstore), as "savepointd migrate-store" does: it refuses what cannot
// be copied, copies every session and graph thread, proves the copy equal
// record by record and through the stores' reads (storecompare), and runs
// the target's Verify. The command keeps only its flags and exit codes.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
)

// ErrRefused is matched (errors.Is) by the errors of Run that refuse the
// data as it is rather than fail on the way: a source whose tombstones
// expired, a target that holds data without AllowNonEmpty, a session or
// graph thread in both.
var ErrRefused = errors.New("migrate: refused")

// refused is an error that matches ErrRefused and reads as its text.
type refused struct{ error }

func (refused) Is(target error) bool { return target == ErrRefused }

func refuse(format string, args ...any) error { return refused{fmt.Errorf(format, args...)} }

// Config is one migration: the stores, both open, and what to copy. The
// caller opens and closes both stores.
type Config struct {
	Source *badgerstore.Store
	Target *pgstore.Store
	// SourceName and TargetName name the stores in messages: the data
	// directory, and the URL with its password redacted.
	SourceName, TargetName string
	// AllowNonEmpty copies into a target that holds data already; a session
	// or graph thread in both is refused. False: a target holding any is
	// refused before anything is copied.
	AllowNonEmpty bool
	// SkipGraphThreads copies the sessions only; false copies the graph
	// threads too.
	SkipGraphThreads bool
	// Progress receives the progress lines and warnings, each a line
	// starting "savepointd migrate-store: "; nil discards them.
	Progress io.Writer
}

// Report is what Run copied and checked.
type Report struct {
	Took time.Duration
	// Sessions copied: Live and Tombstones, and the records they held.
	Live, Tombstones, Revisions, Messages, Effects, Requests int
	// Graph is what was copied of the graph threads (zero when none were).
	Graph GraphCounts
	// GraphCopied says the graph threads were copied; GraphSkipped counts
	// those left behind by SkipGraphThreads.
	GraphCopied  bool
	GraphSkipped int
	// CheckedRecords is how many records the target's Verify read.
	CheckedRecords uint64
}

// GraphCounts counts the graph records copied, and their values' bytes.
type GraphCounts struct {
	Threads, Tombstones, Checkpoints, Blobs, Writes, Requests, Effects int
	Bytes                                                              int64
}

// migration is one run: its config, what it has copied so far, and the
// sessions to compare.
type migration struct {
	cfg     Config
	rep     Report
	ids     []string // live sessions copied
	tombIDs []string // tombstones copied
}

// progress writes one progress line.
func (m *migration) progress(format string, args ...any) {
	if m.cfg.Progress != nil {
		fmt.Fprintf(m.cfg.Progress, "savepointd migrate-store: "+format+"\n", args...)
	}
}

// Run copies cfg.Source into cfg.Target, compares the two, verifies the
// target and reports what was copied. An error matching ErrRefused means
// the data cannot be copied as it is; any other error, that the copy or
// its check failed. After an error the target may hold part of the copy,
// which must not be served: the error says so.
func Run(ctx context.Context, cfg Config) (Report, error) {
	m := &migration{cfg: cfg}
	start := time.Now()
	info, withGraph, err := m.check(ctx)
	if err != nil {
		return m.rep, err
	}
	if err := m.copySessions(ctx, info); err != nil {
		return m.rep, err
	}
	if withGraph {
		if err := m.copyGraph(ctx, info); err != nil {
			return m.rep, err
		}
	}
	if err := m.compareSessions(ctx); err != nil {
		return m.rep, err
	}
	if withGraph {
		if err := CompareGraph(ctx, cfg, m.rep.Graph.Threads); err != nil {
			return m.rep, err
		}
	}
	vr, err := cfg.Target.Verify(ctx)
	if err != nil {
		return m.rep, fmt.Errorf("verify %s: %w", cfg.TargetName, err)
	}
	if len(vr.Damaged) > 0 {
		return m.rep, fmt.Errorf("verify %s: %s after the copy, the first %q: %s", cfg.TargetName, count(len(vr.Damaged), "damaged session"), vr.Damaged[0].SessionID, vr.Damaged[0].Problem)
	}
	m.rep.CheckedRecords = vr.CheckedRecords
	m.rep.Took = time.Since(start)
	return m.rep, nil
}

// check reads what the source holds and refuses what cannot be copied: a
// source whose tombstones expired (an epoch floor the target cannot keep)
// and, unless AllowNonEmpty, a target that holds data. withGraph says
// whether graph threads are to be copied.
func (m *migration) check(ctx context.Context) (info badgerstore.ExportInfo, withGraph bool, err error) {
	info, err = m.cfg.Source.ExportInfo(ctx)
	if err != nil {
		return info, false, fmt.Errorf("read %s: %w", m.cfg.SourceName, err)
	}
	if info.EpochFloor > 0 {
		return info, false, refuse("%s removed expired tombstones up to epoch %d, and the PostgreSQL store keeps no epoch floor: a deleted session's stale writers would not stay fenced; nothing copied", m.cfg.SourceName, info.EpochFloor)
	}
	withGraph = info.GraphThreads > 0 && !m.cfg.SkipGraphThreads
	if info.GraphThreads > 0 && !withGraph {
		m.rep.GraphSkipped = info.GraphThreads
		m.progress("WARNING: skipping %s (GraphCheckpointService); they stay in %s only", count(info.GraphThreads, "graph thread"), m.cfg.SourceName)
	}
	m.rep.GraphCopied = withGraph
	empty, err := m.cfg.Target.Empty(ctx)
	if err != nil {
		return info, false, fmt.Errorf("read %s: %w", m.cfg.TargetName, err)
	}
	if !empty && !m.cfg.AllowNonEmpty {
		return info, false, refuse("schema %q of %s holds sessions or graph threads already; nothing copied (--allow-non-empty copies into it, refusing any session or thread in both)", pgstore.DefaultSchema, m.cfg.TargetName)
	}
	return info, withGraph, nil
}

// copyFailed is the error of a copy stopped by err after n of what: it
// says what stays in the target, and is refused when err is a session or
// thread the target holds already.
func (m *migration) copyFailed(n int, what string, err error) error {
	err = fmt.Errorf("copy stopped after %d %s: %w; what was copied so far stays in %s; drop schema %q and run migrate-store again", n, what, err, m.cfg.TargetName, pgstore.DefaultSchema)
	if errors.Is(err, core.ErrSessionExists) || errors.Is(err, pgstore.ErrThreadExists) {
		return refused{err}
	}
	return err
}

// copySessions copies every session and tombstone of the source, one
// transaction per session, reporting progress each second.
func (m *migration) copySessions(ctx context.Context, info badgerstore.ExportInfo) error {
	r := &m.rep
	last := time.Now()
	err := m.cfg.Source.Export(ctx, func(d *core.SessionDump) error {
		if err := m.cfg.Target.Import(ctx, d); err != nil {
			return err
		}
		if d.Deleted {
			r.Tombstones++
			m.tombIDs = append(m.tombIDs, d.SessionID)
		} else {
			r.Live++
			m.ids = append(m.ids, d.SessionID)
		}
		r.Revisions += len(d.Revisions)
		r.Messages += len(d.Messages)
		r.Effects += len(d.Ledger)
		r.Requests += len(d.Requests)
		if n := r.Live + r.Tombstones; time.Since(last) >= time.Second || n == info.Sessions {
			last = time.Now()
			m.progress("copied %d/%d sessions (%d messages)", n, info.Sessions, r.Messages)
		}
		return nil
	})
	if err != nil {
		return m.copyFailed(r.Live+r.Tombstones, "sessions", err)
	}
	return nil
}

// compareSessions reads every copied live session back from both stores
// (storecompare.Session), and checks that every copied tombstone reads as
// not found in the target.
func (m *migration) compareSessions(ctx context.Context) error {
	last := time.Now()
	for i, sid := range m.ids {
		if err := storecompare.Session(ctx, m.cfg.Source, m.cfg.Target, sid); err != nil {
			return fmt.Errorf("verification failed: %w (the copy in %s must not be served)", err, m.cfg.TargetName)
		}
		if time.Since(last) >= time.Second || i == len(m.ids)-1 {
			last = time.Now()
			m.progress("compared %d/%d live sessions", i+1, len(m.ids))
		}
	}
	for _, sid := range m.tombIDs {
		if _, err := m.cfg.Target.Checkpoint(ctx, sid, 0); !errors.Is(err, core.ErrSessionNotFound) {
			return fmt.Errorf("verification failed: deleted session %q reads as %v in %s, not as not found", sid, err, m.cfg.TargetName)
		}
	}
	return nil
}

// count is n and noun, in the plural unless n is 1 (nouns here take an s).
func count(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
