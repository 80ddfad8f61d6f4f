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

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/migrate"
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

// runMigrate is "savepointd migrate-store": it opens the embedded store in
// --data-dir, which it locks, and the PostgreSQL database --to, and runs
// migrate.Run (copy, compare every session and graph thread, Verify); a
// refusal exits exitData, any other failure exitFail.
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
	rep, err := migrate.Run(ctx, migrate.Config{
		Source: src, Target: dst, SourceName: cfg.DataDir, TargetName: redactURL(cfg.To),
		AllowNonEmpty: cfg.AllowNonEmpty, SkipGraphThreads: cfg.SkipGraphThreads, Progress: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "savepointd migrate-store: %v\n", err)
		if errors.Is(err, migrate.ErrRefused) {
			return exitData
		}
		return exitFail
	}
	printMigrateReport(stdout, cfg, rep)
	return exitOK
}

// printMigrateReport prints on stdout what migrate-store copied and checked.
func printMigrateReport(stdout io.Writer, cfg migrateConfig, rep migrate.Report) {
	target := redactURL(cfg.To)
	fmt.Fprintf(stdout, "migrated %s to %s (schema %q) in %s: %s (%d live, %s), %s, %s, %s, %s; every live session compared equal; verify checked %s, 0 damaged\n",
		cfg.DataDir, target, pgstore.DefaultSchema, rep.Took.Round(time.Millisecond), cli.Count(rep.Live+rep.Tombstones, "session"), rep.Live,
		cli.Count(rep.Tombstones, "tombstone"), cli.Count(rep.Revisions, "revision"), cli.Count(rep.Messages, "message"), cli.Count(rep.Effects, "effect"),
		cli.Count(rep.Requests, "request id"), cli.Count(rep.CheckedRecords, "record"))
	if g := rep.Graph; rep.GraphCopied {
		fmt.Fprintf(stdout, "copied %s (%s), %s, %s, %s, %s, %s, %d MiB of values; every graph thread compared equal\n",
			cli.Count(g.Threads, "graph thread"), cli.Count(g.Tombstones, "tombstone"), cli.Count(g.Checkpoints, "checkpoint"), cli.Count(g.Blobs, "blob"),
			cli.Count(g.Writes, "pending write"), cli.Count(g.Requests, "graph request id"), cli.Count(g.Effects, "graph effect"), g.Bytes>>20)
	} else if rep.GraphSkipped > 0 {
		fmt.Fprintf(stdout, "skipped %s: they are not in %s\n", cli.Count(rep.GraphSkipped, "graph thread"), target)
	}
}
