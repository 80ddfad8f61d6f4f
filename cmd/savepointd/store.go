package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
)

// storeHelp ends --help: what the PostgreSQL store (--store-url) refuses or
// ignores of the embedded store's features. docs/operations.md has the same
// table ("Fleets: PostgreSQL").
const storeHelp = `
Stores: --store-url empty serves the embedded Badger store in --data-dir;
a postgres:// or postgresql:// URL serves that PostgreSQL database (schema
"savepoint"), and --data-dir then holds only the per-host lock.

  feature                      embedded store    PostgreSQL (--store-url)
  --disk-reserve-bytes         applies           refused at start
  --accept-data-loss           applies           refused at start
  --encryption-key-file        applies           refused at start: use the database's
  backup, restore              apply             refused: use pg_dump, pg_restore
  repair-manifest              applies           refused: no MANIFEST
  verify, the Verify RPC       records' CRCs     rows' checksums, over SQL
  GraphCheckpointService       served            served (schema version 3)

savepointd migrate-store --data-dir D --to URL copies a stopped embedded
store into PostgreSQL and verifies the copy (migrate-store -h for its flags).
`

// refusedWithPostgres says why a subcommand does not run with a store URL;
// empty when it does.
func refusedWithPostgres(sub string) string {
	switch sub {
	case "backup", "restore":
		return "backup and restore copy the embedded store; with --store-url back up the database with pg_dump and restore it with pg_restore (docs/operations.md, \"Fleets: PostgreSQL\")"
	case "repair-manifest":
		return "repair-manifest repairs the embedded store's Badger MANIFEST; a PostgreSQL store has none"
	}
	return ""
}

// checkStoreDir refuses a data directory that holds no embedded store, for
// the commands that read a stopped daemon's store: they must not create
// one where a typo points.
func checkStoreDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data directory %s does not exist; give the --data-dir of the stopped daemon", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("data directory %s is not a directory; give the --data-dir of the stopped daemon", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data directory %s holds no store (it has no %s); give the --data-dir of the stopped daemon", dir, badger.ManifestFilename)
	}
	return nil
}

// errStopped is openPostgres's answer to SIGTERM or SIGINT while it waits
// for the database: a clean stop.
var errStopped = errors.New("stopped while waiting for the database")

// openPostgres takes the per-host lock in cfg.DataDir, the same file the
// embedded store locks, so that replacing a stale socket stays safe, and
// opens the PostgreSQL store. With wait, a database that cannot be reached
// is retried, with a growing delay up to 30 s and a warning each time, until
// it can or a signal stops savepointd (errStopped): a fleet's sidecars must
// outlast an outage of the database, not fail their unit. The store's Close
// does not release the lock: the returned release does, after it.
func openPostgres(cfg config, logger *slog.Logger, wait bool) (core.Store, func(), error) {
	lock, err := badgerstore.LockDir(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger.Info("opening the PostgreSQL store", "store_url", redactURL(cfg.Store.URL), "schema", pgstore.DefaultSchema)
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		s, err := pgstore.Open(ctx, cfg.Store.URL, pgstore.Options{Logger: logger})
		if err == nil {
			return s, func() { lock.Close() }, nil
		}
		if !wait || !errors.Is(err, core.ErrUnavailable) || ctx.Err() != nil {
			lock.Close()
			if ctx.Err() != nil {
				return nil, nil, errStopped
			}
			return nil, nil, err
		}
		logger.Warn("the database cannot be reached; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			lock.Close()
			return nil, nil, errStopped
		case <-time.After(delay):
		}
	}
}

// openStoreError maps an error of opening a store to savepointd's exit
// code, printing it.
func openStoreError(cfg config, err error, stderr io.Writer) int {
	switch {
	case errors.Is(err, badgerstore.ErrLocked):
		fmt.Fprintf(stderr, "savepointd: cannot lock data directory %s: %v\n", cfg.DataDir, err)
		return exitLocked
	case errors.Is(err, badgerstore.ErrBehind), errors.Is(err, badgerstore.ErrFormat), errors.Is(err, badgerstore.ErrDamaged),
		errors.Is(err, badgerstore.ErrEncryptionKey), errors.Is(err, pgstore.ErrFormat):
		fmt.Fprintf(stderr, "savepointd: %v\n", err)
		return exitData
	case errors.Is(err, errStopped):
		fmt.Fprintf(stderr, "savepointd: %v\n", err)
		return exitOK
	case errors.Is(err, pgstore.ErrConfig):
		fmt.Fprintf(stderr, "savepointd: %v\n", err)
		return exitConfig
	default:
		fmt.Fprintf(stderr, "savepointd: open store: %v\n", err)
		return exitFail
	}
}
