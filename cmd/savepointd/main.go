// Command savepointd is the Savepoint daemon: it keeps agent loops'
// checkpoints and side-effects ledger in a Badger store, or a PostgreSQL
// database shared by a fleet (--store-url), and serves them over gRPC.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/internal/cli"
	"github.com/savepoint-dev/savepoint/internal/logfile"
	"github.com/savepoint-dev/savepoint/internal/version"
)

// Exit codes.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2
	exitLocked = 3
	exitData   = 4 // the data directory cannot be served as it is (damaged, behind, another encryption key), or verify found damage
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// memoryLimit returns the soft memory limit savepointd sets: the
// configured one, unless GOMEMLIMIT is set, in which case the runtime has
// already taken that one and ok is false.
func memoryLimit(cfg config, env func(string) string) (limit int64, ok bool) {
	if env("GOMEMLIMIT") != "" {
		return 0, false
	}
	return cfg.MemoryLimit, true
}

// gcPercent returns the collector's target percentage savepointd sets:
// daemon.PostgresGCPercent on the PostgreSQL store. ok is false where it
// leaves the runtime's own: on the embedded store, and whenever GOGC is set.
func gcPercent(cfg config, env func(string) string) (percent int, ok bool) {
	if env("GOGC") != "" || cfg.Store.URL == "" {
		return 0, false
	}
	return daemon.PostgresGCPercent, true
}

// run is savepointd with its arguments, environment, stdout and stderr; it
// returns the exit code. Without a command it serves the store; the
// commands (commands.go) check, repair, back up, restore (backup.go) and
// migrate (migrate.go) a stopped daemon's store. Flags and arguments may
// come in any order after the command's name.
func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	var sub *subcommand
	if len(args) > 0 {
		if sub = lookupSubcommand(args[0]); sub != nil {
			args = args[1:]
		}
	}
	switch {
	case sub == nil:
	case sub.name == "migrate-store":
		return runMigrate(sub, args, env, stdout, stderr) // migrate.go
	case sub.name == "version":
		return runVersion(sub, args, stdout, stderr)
	}
	cfg, pos, err := parseArgs(sub, args, env)
	if code, done := answerParse(sub, err, stdout, stderr); done {
		return code
	}
	name := ""
	if sub != nil {
		name = sub.name
	}
	if sub == nil && cfg.LogFile != "" { // serving only: no command's output (a backup on stdout) is redirected
		lf, err := logfile.Open(cfg.LogFile, cfg.LogFileMaxBytes, logfile.Std)
		if err != nil {
			fmt.Fprintf(stderr, "savepointd: --log-file: %v\n", err)
			return exitConfig
		}
		defer lf.Close()
		stdout, stderr = lf, lf
	}
	files := pos
	if name == "restore" && len(files) == 0 {
		files = []string{"-"}
	}
	logger, _ := daemon.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel) // the format is validated
	if limit, ok := memoryLimit(cfg, env); ok {
		debug.SetMemoryLimit(limit)
	}
	if percent, ok := gcPercent(cfg, env); ok {
		debug.SetGCPercent(percent)
	}
	key, code, done := readyToOpen(name, cfg, files, stderr)
	switch {
	case done:
		return code
	case name == "repair-manifest":
		return runRepair(cfg.DataDir, key, stdout, stderr)
	case cfg.Store.URL != "":
		return runPostgres(cfg, name == "verify", logger, stdout, stderr)
	}
	return runEmbedded(cfg, name, key, files, logger, stdout, stderr)
}

// answerParse answers --help, --version and a command line parseArgs
// refused (err); done is false when err is nil and run goes on.
func answerParse(sub *subcommand, err error, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case errors.Is(err, flag.ErrHelp):
		if sub == nil {
			printUsage(stdout, helpFlags())
		} else {
			printCommandHelp(stdout, sub, sub.subFlags(helpFlags()))
		}
		return exitOK, true
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, "savepointd", version.String())
		return exitOK, true
	case err != nil:
		fmt.Fprintln(stderr, errorLine(sub, err))
		return exitConfig, true
	}
	return exitOK, false
}

// readyToOpen refuses, before any store is opened, what must not open one:
// a command the PostgreSQL store does not offer, a key file that cannot be
// read, what checkOffline refuses, and a restore into a directory that
// holds anything. It returns the encryption key; done is true, with the
// exit code, when run must stop.
func readyToOpen(name string, cfg config, files []string, stderr io.Writer) (key []byte, code int, done bool) {
	if why := refusedWithPostgres(name); cfg.Store.URL != "" && why != "" {
		fmt.Fprintf(stderr, "savepointd %s: not available with --store-url: %s\n", name, why)
		return nil, exitConfig, true
	}
	if cfg.Store.EncryptionKeyFile != "" {
		var err error
		if key, err = badgerstore.ReadKeyFile(cfg.Store.EncryptionKeyFile); err != nil {
			fmt.Fprintf(stderr, "savepointd: %v\n", err)
			return nil, exitConfig, true
		}
	}
	if err := checkOffline(name, cfg, files); err != nil {
		fmt.Fprintf(stderr, "savepointd %s: %v\n", name, err)
		return nil, exitConfig, true
	}
	if name == "restore" {
		if code := checkRestoreDir(cfg.DataDir, stderr); code != exitOK {
			return nil, code, true
		}
	}
	return key, exitOK, false
}

// runPostgres serves the PostgreSQL store cfg.Store.URL, or verifies it.
func runPostgres(cfg config, verify bool, logger *slog.Logger, stdout, stderr io.Writer) int {
	opened := daemon.NotifyStarting(logger) // a long wait for the database must not hit systemd's start timeout
	store, release, err := openPostgres(cfg, logger, !verify)
	opened()
	if err != nil {
		return openStoreError(cfg, err, stderr)
	}
	defer release()
	code := serve(cfg, store, verify, logger, stdout, stderr)
	if !closeStore(store, cfg.ShutdownTimeout, logger) && code == exitOK {
		code = exitFail
	}
	return code
}

// runEmbedded opens the embedded store in cfg.DataDir and serves it, or
// runs the command name on it: verify, backup (to files[0]) or restore
// (from files).
func runEmbedded(cfg config, name string, key []byte, files []string, logger *slog.Logger, stdout, stderr io.Writer) int {
	opened := daemon.NotifyStarting(logger) // a long log replay must not hit systemd's start timeout
	store, err := badgerstore.Open(cfg.DataDir, badgerstore.Options{
		Logger: logger, DiskReserve: cfg.Store.DiskReserveBytes, AcceptDataLoss: cfg.Store.AcceptDataLoss,
		ExitAfterClose: true, EncryptionKey: key,
		Retention: badgerstore.Retention{
			Completed: cfg.RetainCompleted, Idle: cfg.RetainIdle, Revisions: cfg.RetainRevisions, Interval: cfg.GCInterval,
		},
	})
	opened()
	if err != nil {
		return openStoreError(cfg, err, stderr)
	}
	var code int
	switch name {
	case "backup":
		code = runBackup(store, files[0], stdout, stderr)
	case "restore":
		code = runRestore(store, files, stdout, stderr)
	default:
		code = serve(cfg, store, name == "verify", logger, stdout, stderr)
	}
	if !closeStore(store, cfg.ShutdownTimeout, logger) && code == exitOK {
		code = exitFail
	}
	return code
}

// checkOffline refuses what a command that reads a stopped daemon's store
// or backup files would otherwise create: a store where --data-dir names
// none, or a restored store from files that do not exist.
func checkOffline(name string, cfg config, files []string) error {
	switch name {
	case "verify":
		if cfg.Store.URL != "" {
			return nil
		}
		return checkStoreDir(cfg.DataDir)
	case "repair-manifest", "backup":
		return checkStoreDir(cfg.DataDir)
	case "restore":
		return checkBackupFiles(files)
	}
	return nil
}

// serve runs the daemon, or the verification, until a signal or a failure.
func serve(cfg config, store core.Store, verify bool, logger *slog.Logger, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if verify {
		return runVerify(ctx, store, stdout, stderr)
	}
	if err := daemon.Run(ctx, cfg.Config, store, logger); err != nil {
		logger.Error("savepointd failed", "err", err)
		if errors.Is(err, daemon.ErrConfig) {
			return exitConfig
		}
		return exitFail
	}
	if err := storeErr(store); err != nil {
		logger.Error("savepointd stopped after a storage failure; restart it to recover", "err", err)
		return exitFail
	}
	return exitOK
}

// storeErr returns the failure that stopped a store that can fail beyond
// repair (the embedded store), or nil.
func storeErr(store core.Store) error {
	if f, ok := store.(interface{ Err() error }); ok {
		return f.Err()
	}
	return nil
}

// closeStore closes the store, giving up after timeout: Badger retries a
// failing MANIFEST write forever, and its write-ahead log, already synced,
// replays at the next start.
// It reports whether the store closed cleanly.
func closeStore(store core.Store, timeout time.Duration, logger *slog.Logger) bool {
	done := make(chan error, 1)
	go func() { done <- store.Close() }()
	select {
	case err := <-done:
		if err != nil && storeErr(store) == nil { // a storage failure is already logged
			logger.Error("close store", "err", err)
			return false
		}
		return true
	case <-time.After(timeout):
		logger.Error("closing the store did not finish; exiting without it (the synced log replays at the next start)", "timeout", timeout)
		return false
	}
}

// runRepair checks the key against the store in dir, removes the records of
// missing tables from Badger's MANIFEST (see badgerstore.RepairManifest) and
// says what it removed.
func runRepair(dir string, key []byte, stdout, stderr io.Writer) int {
	if err := badgerstore.CheckEncryptionKey(dir, key); err != nil {
		fmt.Fprintf(stderr, "savepointd repair-manifest: %v\n", err)
		return exitData
	}
	dropped, err := badgerstore.RepairManifest(dir)
	switch {
	case errors.Is(err, badgerstore.ErrLocked):
		fmt.Fprintf(stderr, "savepointd repair-manifest: %v\n", err)
		return exitLocked
	case errors.Is(err, badgerstore.ErrUnsafeRepair):
		fmt.Fprintf(stderr, "savepointd repair-manifest: %v\n", err)
		return exitData
	case err != nil:
		fmt.Fprintf(stderr, "savepointd repair-manifest: %v\n", err)
		return exitFail
	case len(dropped) == 0:
		fmt.Fprintln(stdout, "the MANIFEST lists no missing table: nothing to repair")
	default:
		fmt.Fprintf(stdout, "removed the MANIFEST records of missing tables %s; now run savepointd verify\n", strings.Join(dropped, ", "))
	}
	return exitOK
}

// runVerify prints the store's VerifyResponse as JSON, as the Verify RPC
// returns it; it exits exitData when a session is damaged.
func runVerify(ctx context.Context, store core.Store, stdout, stderr io.Writer) int {
	rep, err := store.Verify(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "savepointd verify: %v\n", err)
		return exitFail
	}
	out, _ := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(rpc.VerifyReportToProto(rep))
	fmt.Fprintf(stdout, "%s\n", out)
	if len(rep.Damaged) > 0 {
		fmt.Fprintf(stderr, "savepointd verify: %s\n", cli.Count(len(rep.Damaged), "damaged session"))
		return exitData
	}
	return exitOK
}
