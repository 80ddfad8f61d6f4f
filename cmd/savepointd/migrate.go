package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
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

// run copies the source into the target, compares the two, verifies the
// target, and reports what was copied; it returns the exit code.
func (m *migration) run(ctx context.Context) int {
	start := time.Now()
	info, withGraph, code := m.check(ctx)
	if code != exitOK {
		return code
	}
	if code := m.copySessions(ctx, info); code != exitOK {
		return code
	}
	if withGraph {
		if code := m.copyGraph(ctx, info); code != exitOK {
			return code
		}
	}
	if code := m.compareSessions(ctx); code != exitOK {
		return code
	}
	if withGraph {
		if code := m.compareGraph(ctx); code != exitOK {
			return code
		}
	}
	rep, err := m.dst.Verify(ctx)
	if err != nil {
		return m.fail("verify %s: %v", redactURL(m.cfg.To), err)
	}
	if len(rep.Damaged) > 0 {
		return m.fail("verify %s: %s after the copy, the first %q: %s", redactURL(m.cfg.To), cli.Count(len(rep.Damaged), "damaged session"), rep.Damaged[0].SessionID, rep.Damaged[0].Problem)
	}
	m.report(time.Since(start), info, withGraph, rep.CheckedRecords)
	return exitOK
}

// check reads what the source holds and refuses what cannot be copied: a
// source whose tombstones expired (an epoch floor the target cannot keep)
// and, unless --allow-non-empty, a target that holds data. withGraph says
// whether graph threads are to be copied.
func (m *migration) check(ctx context.Context) (info badgerstore.ExportInfo, withGraph bool, code int) {
	info, err := m.src.ExportInfo(ctx)
	if err != nil {
		return info, false, m.fail("read %s: %v", m.cfg.DataDir, err)
	}
	target := redactURL(m.cfg.To)
	if info.EpochFloor > 0 {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: %s removed expired tombstones up to epoch %d, and the PostgreSQL store keeps no epoch floor: a deleted session's stale writers would not stay fenced; nothing copied\n", m.cfg.DataDir, info.EpochFloor)
		return info, false, exitData
	}
	withGraph = info.GraphThreads > 0 && !m.cfg.SkipGraphThreads
	if info.GraphThreads > 0 && !withGraph {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: WARNING: skipping %s (GraphCheckpointService); they stay in %s only\n", cli.Count(info.GraphThreads, "graph thread"), m.cfg.DataDir)
	}
	empty, err := m.dst.Empty(ctx)
	if err != nil {
		return info, false, m.fail("read %s: %v", target, err)
	}
	if !empty && !m.cfg.AllowNonEmpty {
		fmt.Fprintf(m.stderr, "savepointd migrate-store: schema %q of %s holds sessions or graph threads already; nothing copied (--allow-non-empty copies into it, refusing any session or thread in both)\n", pgstore.DefaultSchema, target)
		return info, false, exitData
	}
	return info, withGraph, exitOK
}

// copySessions copies every session and tombstone of the source, one
// transaction per session, reporting progress each second.
func (m *migration) copySessions(ctx context.Context, info badgerstore.ExportInfo) int {
	last := time.Now()
	err := m.src.Export(ctx, func(d *core.SessionDump) error {
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
		fmt.Fprintf(m.stderr, "savepointd migrate-store: the sessions copied so far stay in %s; drop schema %q and run migrate-store again\n", redactURL(m.cfg.To), pgstore.DefaultSchema)
		if errors.Is(err, core.ErrSessionExists) {
			return exitData
		}
		return exitFail
	}
	return exitOK
}

// compareSessions reads every copied live session back from both stores
// (storecompare.Session), and checks that every copied tombstone reads as
// not found in the target.
func (m *migration) compareSessions(ctx context.Context) int {
	target := redactURL(m.cfg.To)
	last := time.Now()
	for i, sid := range m.ids {
		if err := storecompare.Session(ctx, m.src, m.dst, sid); err != nil {
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
	return exitOK
}

// report prints on stdout what was copied and checked.
func (m *migration) report(took time.Duration, info badgerstore.ExportInfo, withGraph bool, checkedRecords uint64) {
	target := redactURL(m.cfg.To)
	fmt.Fprintf(m.stdout, "migrated %s to %s (schema %q) in %s: %s (%d live, %s), %s, %s, %s, %s; every live session compared equal; verify checked %s, 0 damaged\n",
		m.cfg.DataDir, target, pgstore.DefaultSchema, took.Round(time.Millisecond), cli.Count(m.live+m.tombs, "session"), m.live,
		cli.Count(m.tombs, "tombstone"), cli.Count(m.revisions, "revision"), cli.Count(m.messages, "message"), cli.Count(m.calls, "ledger call"),
		cli.Count(m.requests, "request id"), cli.Count(checkedRecords, "record"))
	if g := m.graph; withGraph {
		fmt.Fprintf(m.stdout, "copied %s (%s), %s, %s, %s, %s, %s, %d MiB of values; every graph thread compared equal\n",
			cli.Count(g.threads, "graph thread"), cli.Count(g.tombs, "tombstone"), cli.Count(g.checkpoints, "checkpoint"), cli.Count(g.blobs, "blob"),
			cli.Count(g.writes, "pending write"), cli.Count(g.requests, "graph request id"), cli.Count(g.effects, "graph ledger entry"), g.bytes>>20)
	} else if info.GraphThreads > 0 {
		fmt.Fprintf(m.stdout, "skipped %s: they are not in %s\n", cli.Count(info.GraphThreads, "graph thread"), target)
	}
}
