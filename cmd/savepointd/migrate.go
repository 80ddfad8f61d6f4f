package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/internal/cli"
)

// migrateConfig is what "savepointd migrate-store" is told.
type migrateConfig struct {
	DataDir           string // the embedded store to copy; required
	To                string // the PostgreSQL URL to copy into; required
	EncryptionKeyFile string // empty: the store is not encrypted
	AllowNonEmpty     bool   // false: refuse a schema that holds any session
	SkipGraphThreads  bool   // false: copy the graph threads too
}

// Validate says what is missing or wrong in c.
func (c migrateConfig) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("--data-dir is required")
	case c.To == "":
		return errors.New("--to is required: the postgres:// or postgresql:// URL to copy into")
	case !strings.HasPrefix(c.To, "postgres://") && !strings.HasPrefix(c.To, "postgresql://"):
		return fmt.Errorf("--to %q is not a postgres:// or postgresql:// URL", redactURL(c.To))
	}
	return nil
}

// migrateFlags defines migrate-store's flags on a new flag set, each
// setting its field of c, whose values are the defaults.
func migrateFlags(c *migrateConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("savepointd migrate-store", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "the embedded store's `directory`, its daemon stopped (env SAVEPOINT_DATA_DIR)")
	fs.StringVar(&c.To, "to", c.To, "the PostgreSQL `URL` to copy into, as --store-url takes it (env SAVEPOINT_STORE_URL)")
	fs.StringVar(&c.EncryptionKeyFile, "encryption-key-file", c.EncryptionKeyFile, "the embedded store's key `file`, when it is encrypted (env SAVEPOINT_ENCRYPTION_KEY_FILE)")
	fs.BoolVar(&c.AllowNonEmpty, "allow-non-empty", false, "copy into a schema that holds sessions already; a session in both is refused")
	fs.BoolVar(&c.SkipGraphThreads, "skip-graph-threads", false, "copy the sessions only, leaving the graph threads (GraphCheckpointService) behind")
	return fs
}

// parseMigrateConfig reads migrate-store's configuration from flags, in any
// order, then the environment.
func parseMigrateConfig(sub *subcommand, args []string, env func(string) string) (migrateConfig, error) {
	c := migrateConfig{DataDir: env("SAVEPOINT_DATA_DIR"), To: env("SAVEPOINT_STORE_URL"), EncryptionKeyFile: env("SAVEPOINT_ENCRYPTION_KEY_FILE")}
	pos, err := cli.Interspersed(migrateFlags(&c), args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return c, flagError{err}
	} else if err != nil {
		return c, err
	}
	if err := sub.checkArgs(pos); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// runMigrate is "savepointd migrate-store": it copies the embedded store
// in --data-dir, which it locks, into the PostgreSQL database --to, then
// compares every session and graph thread on both sides and runs the
// database's Verify.
func runMigrate(sub *subcommand, args []string, env func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseMigrateConfig(sub, args, env)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, sub, migrateFlags(&migrateConfig{}))
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, errorLine(sub, err))
		return exitConfig
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var key []byte
	if cfg.EncryptionKeyFile != "" {
		if key, err = badgerstore.ReadKeyFile(cfg.EncryptionKeyFile); err != nil {
			fmt.Fprintf(stderr, "savepointd migrate-store: %v\n", err)
			return exitConfig
		}
	}
	if err := checkStoreDir(cfg.DataDir); err != nil {
		fmt.Fprintf(stderr, "savepointd migrate-store: %v\n", err)
		return exitConfig
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	src, err := badgerstore.Open(cfg.DataDir, badgerstore.Options{Logger: logger, EncryptionKey: key})
	if err != nil {
		return openStoreError(config{Config: daemon.Config{DataDir: cfg.DataDir}}, err, stderr)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, cfg.To, pgstore.Options{Logger: logger})
	if err != nil {
		return openStoreError(config{Config: daemon.Config{DataDir: cfg.DataDir}}, err, stderr)
	}
	defer dst.Close()
	m := &migration{cfg: cfg, src: src, dst: dst, stdout: stdout, stderr: stderr}
	return m.run(ctx)
}

// migration is one run of migrate-store.
type migration struct {
	cfg    migrateConfig
	src    *badgerstore.Store
	dst    *pgstore.Store
	stdout io.Writer
	stderr io.Writer

	live, tombs, revisions, messages, calls, requests int
	ids                                               []string // live sessions copied
	tombIDs                                           []string // tombstones copied
	graph                                             graphCopied
}

func (m *migration) fail(format string, args ...any) int {
	fmt.Fprintf(m.stderr, "savepointd migrate-store: "+format+"\n", args...)
	return exitFail
}

func (m *migration) run(ctx context.Context) int {
	start := time.Now()
	info, err := m.src.ExportInfo(ctx)
	if err != nil {
		return m.fail("read %s: %v", m.cfg.DataDir, err)
	}
	target := redactURL(m.cfg.To)
	if info.EpochFloor > 0 {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: %s removed expired tombstones up to epoch %d, and the PostgreSQL store keeps no epoch floor: a deleted session's stale writers would not stay fenced; nothing copied\n", m.cfg.DataDir, info.EpochFloor)
		return exitData
	}
	withGraph := info.GraphThreads > 0 && !m.cfg.SkipGraphThreads
	if info.GraphThreads > 0 && !withGraph {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: WARNING: skipping %s (GraphCheckpointService); they stay in %s only\n", cli.Count(info.GraphThreads, "graph thread"), m.cfg.DataDir)
	}
	empty, err := m.dst.Empty(ctx)
	if err != nil {
		return m.fail("read %s: %v", target, err)
	}
	if !empty && !m.cfg.AllowNonEmpty {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: schema %q of %s holds sessions or graph threads already; nothing copied (--allow-non-empty copies into it, refusing any session or thread in both)\n", pgstore.DefaultSchema, target)
		return exitData
	}
	last := time.Now()
	err = m.src.Export(ctx, func(d *core.SessionDump) error {
		if err := m.dst.Import(ctx, d); err != nil {
			return err
		}
		if d.Deleted {
			m.tombs++
			m.tombIDs = append(m.tombIDs, d.SessionID)
		} else {
			m.live++
			m.ids = append(m.ids, d.SessionID)
		}
		m.revisions += len(d.Revisions)
		m.messages += len(d.Messages)
		m.calls += len(d.Ledger)
		m.requests += len(d.Requests)
		if n := m.live + m.tombs; time.Since(last) >= time.Second || n == info.Sessions {
			last = time.Now()
			fmt.Fprintf(m.stderr, "savepointd migrate-store: copied %d/%d sessions (%d messages)\n", n, info.Sessions, m.messages)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: copy stopped after %d sessions: %v\n", m.live+m.tombs, err)
		fmt.Fprintf(m.stderr, "savepointd migrate-store: the sessions copied so far stay in %s; drop schema %q and run migrate-store again\n", target, pgstore.DefaultSchema)
		if errors.Is(err, core.ErrSessionExists) {
			return exitData
		}
		return exitFail
	}
	if withGraph {
		if code := m.copyGraph(ctx, info); code != exitOK {
			return code
		}
	}
	for i, sid := range m.ids {
		if err := compareSession(ctx, m.src, m.dst, sid); err != nil {
			return m.fail("verification failed: %v (the copy in %s must not be served)", err, target)
		}
		if time.Since(last) >= time.Second || i == len(m.ids)-1 {
			last = time.Now()
			fmt.Fprintf(m.stderr, "savepointd migrate-store: compared %d/%d live sessions\n", i+1, len(m.ids))
		}
	}
	for _, sid := range m.tombIDs {
		if _, err := m.dst.Checkpoint(ctx, sid, 0); !errors.Is(err, core.ErrSessionNotFound) {
			return m.fail("verification failed: deleted session %q reads as %v in %s, not as not found", sid, err, target)
		}
	}
	if withGraph {
		if code := m.compareGraph(ctx); code != exitOK {
			return code
		}
	}
	rep, err := m.dst.Verify(ctx)
	if err != nil {
		return m.fail("verify %s: %v", target, err)
	}
	if len(rep.Damaged) > 0 {
		return m.fail("verify %s: %s after the copy, the first %q: %s", target, cli.Count(len(rep.Damaged), "damaged session"), rep.Damaged[0].SessionID, rep.Damaged[0].Problem)
	}
	fmt.Fprintf(m.stdout, "migrated %s to %s (schema %q) in %s: %s (%d live, %s), %s, %s, %s, %s; every live session compared equal; verify checked %s, 0 damaged\n",
		m.cfg.DataDir, target, pgstore.DefaultSchema, time.Since(start).Round(time.Millisecond), cli.Count(m.live+m.tombs, "session"), m.live,
		cli.Count(m.tombs, "tombstone"), cli.Count(m.revisions, "revision"), cli.Count(m.messages, "message"), cli.Count(m.calls, "ledger call"),
		cli.Count(m.requests, "request id"), cli.Count(rep.CheckedRecords, "record"))
	if g := m.graph; withGraph {
		fmt.Fprintf(m.stdout, "copied %s (%s), %s, %s, %s, %s, %s, %d MiB of values; every graph thread compared equal\n",
			cli.Count(g.threads, "graph thread"), cli.Count(g.tombs, "tombstone"), cli.Count(g.checkpoints, "checkpoint"), cli.Count(g.blobs, "blob"),
			cli.Count(g.writes, "pending write"), cli.Count(g.requests, "graph request id"), cli.Count(g.effects, "graph ledger entry"), g.bytes>>20)
	} else if info.GraphThreads > 0 {
		fmt.Fprintf(m.stdout, "skipped %s: they are not in %s\n", cli.Count(info.GraphThreads, "graph thread"), target)
	}
	return exitOK
}

// compareSession reads one live session from both stores through
// core.Store and returns how they differ: every kept revision with all
// its messages, the pending tool uses and the ledger.
func compareSession(ctx context.Context, a, b core.Store, sid string) error {
	latest, err := a.Checkpoint(ctx, sid, 0)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if got, err := b.Checkpoint(ctx, sid, 0); err != nil || !sameCheckpoint(latest, got) {
		return fmt.Errorf("session %q: the latest checkpoint differs (%v)", sid, err)
	}
	for rev := uint64(1); rev <= latest.Revision; rev++ {
		want, err := a.Checkpoint(ctx, sid, rev)
		if errors.Is(err, core.ErrRevisionNotFound) {
			if _, err := b.Checkpoint(ctx, sid, rev); !errors.Is(err, core.ErrRevisionNotFound) {
				return fmt.Errorf("session %q revision %d: not kept in the source, but read in the target (%v)", sid, rev, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("session %q revision %d: source: %w", sid, rev, err)
		}
		if got, err := b.Checkpoint(ctx, sid, rev); err != nil || !sameCheckpoint(want, got) {
			return fmt.Errorf("session %q revision %d: the checkpoint differs (%v)", sid, rev, err)
		}
		wm, err := allMessages(ctx, a, sid, rev)
		if err != nil {
			return fmt.Errorf("session %q revision %d: source: %w", sid, rev, err)
		}
		gm, err := allMessages(ctx, b, sid, rev)
		if err != nil || !slices.Equal(wm, gm) {
			return fmt.Errorf("session %q revision %d: the messages differ (%d and %d; %v)", sid, rev, len(wm), len(gm), err)
		}
	}
	wr, wc, err := a.PendingToolUses(ctx, sid)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if gr, gc, err := b.PendingToolUses(ctx, sid); err != nil || gr != wr || !reflect.DeepEqual(normalizePending(wc), normalizePending(gc)) {
		return fmt.Errorf("session %q: the pending tool uses differ (%v)", sid, err)
	}
	we, err := allEffects(ctx, a, sid)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if ge, err := allEffects(ctx, b, sid); err != nil || !reflect.DeepEqual(we, ge) {
		return fmt.Errorf("session %q: the ledger differs (%d and %d entries; %v)", sid, len(we), len(ge), err)
	}
	return nil
}

// sameCheckpoint compares two checkpoints, times to the nanosecond.
func sameCheckpoint(a, b core.Checkpoint) bool {
	eq := a.SaveTime.Equal(b.SaveTime) && a.CompleteTime.Equal(b.CompleteTime) && a.CreateTime.Equal(b.CreateTime) &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.PendingToolUses, b.PendingToolUses)
	a.SaveTime, b.SaveTime, a.CompleteTime, b.CompleteTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	a.CreateTime, b.CreateTime = time.Time{}, time.Time{}
	a.Labels, b.Labels, a.PendingToolUses, b.PendingToolUses = nil, nil, nil, nil
	return eq && reflect.DeepEqual(a, b)
}

func allMessages(ctx context.Context, s core.Store, sid string, rev uint64) ([]core.Message, error) {
	var out []core.Message
	for {
		page, err := s.Messages(ctx, sid, rev, uint64(len(out)), 4<<20, 0)
		if err != nil || len(page) == 0 {
			return out, err
		}
		out = append(out, page...)
	}
}

func allEffects(ctx context.Context, s core.Store, sid string) ([]core.LedgerEntry, error) {
	var out []core.LedgerEntry
	after := ""
	for {
		page, err := s.Effects(ctx, sid, after, 500)
		if err != nil || len(page) == 0 {
			return normalizeTimes(out), err
		}
		out = append(out, page...)
		after = page[len(page)-1].ToolUseID
	}
}

// normalizeTimes puts every time of the entries in UTC, so that
// reflect.DeepEqual compares instants, not locations.
func normalizeTimes(es []core.LedgerEntry) []core.LedgerEntry {
	for i := range es {
		es[i].BeginTime = es[i].BeginTime.UTC()
		if e := es[i].Effect; e != nil {
			c := *e
			c.RecordTime = c.RecordTime.UTC()
			es[i].Effect = &c
		}
	}
	return es
}

// normalizePending puts the calls' effects' times in UTC.
func normalizePending(cs []core.PendingToolUse) []core.PendingToolUse {
	for i := range cs {
		if e := cs[i].Effect; e != nil {
			c := *e
			c.RecordTime = c.RecordTime.UTC()
			cs[i].Effect = &c
		}
	}
	return cs
}
