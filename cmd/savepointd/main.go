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
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/internal/cli"
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
	files := pos
	if name == "restore" && len(files) == 0 {
		files = []string{"-"}
	}
	logger, _ := daemon.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel) // the format is validated
	if limit, ok := memoryLimit(cfg, env); ok {
		debug.SetMemoryLimit(limit)
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

// errVersion is parseArgs's answer to --version.
var errVersion = errors.New("version requested")

// runVersion is "savepointd version".
func runVersion(sub *subcommand, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(sub.prefix(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pos, err := cli.Interspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, sub, nil)
		return exitOK
	} else if err != nil {
		err = flagError{err}
	}
	if err == nil {
		err = sub.checkArgs(pos)
	}
	if err != nil {
		fmt.Fprintln(stderr, errorLine(sub, err))
		return exitConfig
	}
	fmt.Fprintln(stdout, "savepointd", version.String())
	return exitOK
}

// parseConfig reads serving's configuration from flags, then environment
// variables, then defaults, in that order of precedence, and validates it.
func parseConfig(args []string, env func(string) string, stderr io.Writer) (config, error) {
	cfg, _, err := parseArgs(nil, args, env)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stderr, helpFlags())
	}
	return cfg, err
}

// daemonFlags is the flag set of every setting, with the environment
// variable of each flag.
type daemonFlags struct {
	fs      *flag.FlagSet
	envVars map[string]string // flag name -> environment variable
	lists   []*idList
	version *bool
}

// parseArgs reads the configuration of sub (nil: serving) as parseConfig
// does, taking only the flags sub names, and returns the positional
// arguments, checked against what sub takes.
func parseArgs(sub *subcommand, args []string, env func(string) string) (config, []string, error) {
	cfg := defaultConfig()
	f := newFlags(&cfg)
	parse := f.fs
	if sub != nil {
		parse = sub.subFlags(f.fs) // before the environment sets them: the defaults its help shows
	}
	var envErr error // reported after --version, which needs no valid environment
	for flagName, envVar := range f.envVars {
		if v := env(envVar); v != "" {
			if err := f.fs.Set(flagName, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %v", envVar, v, err)
			}
		}
	}
	for _, l := range f.lists {
		l.replace = true // a flag replaces what the environment set
	}
	pos, err := cli.Interspersed(parse, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return cfg, nil, flagError{err}
	} else if err != nil {
		return cfg, nil, err
	}
	if *f.version {
		return cfg, nil, errVersion
	}
	if envErr != nil {
		return cfg, nil, envErr
	}
	if err := sub.checkArgs(pos); err != nil {
		return cfg, nil, err
	}
	return cfg, pos, validate(cfg)
}

// validate checks a parsed configuration.
func validate(cfg config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	if cfg.TLSCertFile != "" && cfg.TLSKeyFile != "" && cfg.TLSClientCAFile != "" {
		if _, err := daemon.ServerTLSConfig(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile); err != nil {
			return fmt.Errorf("invalid configuration: %w", err)
		}
	}
	if cfg.MaxRequestBytes > badgerstore.MaxRequestBytes {
		return fmt.Errorf("invalid configuration: --max-request-bytes %d is over the %d bytes the store's transactions are sized for",
			cfg.MaxRequestBytes, badgerstore.MaxRequestBytes)
	}
	return nil
}

// helpFlags is the flag set the help lists, with the defaults.
func helpFlags() *flag.FlagSet {
	cfg := defaultConfig()
	return newFlags(&cfg).fs
}

// newFlags defines every flag of savepointd on a new flag set, each
// setting its field of cfg, whose values are the defaults.
func newFlags(cfg *config) daemonFlags {
	fs := flag.NewFlagSet("savepointd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	envVars := map[string]string{} // flag name -> environment variable
	name := func(flagName, envVar string) string {
		envVars[flagName] = envVar
		return flagName
	}
	fs.StringVar(&cfg.DataDir, name("data-dir", "SAVEPOINT_DATA_DIR"), cfg.DataDir,
		"store `directory`; with --store-url it holds only the per-host lock (env SAVEPOINT_DATA_DIR)")
	fs.StringVar(&cfg.Store.URL, name("store-url", "SAVEPOINT_STORE_URL"), cfg.Store.URL,
		"empty: the embedded store in --data-dir; a postgres:// or postgresql:// `URL`: that PostgreSQL database (see Stores below) (env SAVEPOINT_STORE_URL)")
	fs.StringVar(&cfg.Listen, name("listen", "SAVEPOINT_ADDR"), cfg.Listen,
		"listen `address`: unix:PATH, a loopback HOST:PORT, or any HOST:PORT with mutual TLS (--tls-cert) (env SAVEPOINT_ADDR)")
	fs.Var((*modeValue)(&cfg.SocketMode), name("socket-mode", "SAVEPOINT_SOCKET_MODE"),
		"Unix socket permission `mode`: 0600, or 0660 to let the socket's group connect (env SAVEPOINT_SOCKET_MODE)")
	fs.IntVar(&cfg.MaxRequestBytes, name("max-request-bytes", "SAVEPOINT_MAX_REQUEST_BYTES"), cfg.MaxRequestBytes,
		"largest request accepted, in `bytes` (env SAVEPOINT_MAX_REQUEST_BYTES)")
	fs.IntVar(&cfg.MaxMessageBytes, name("max-message-bytes", "SAVEPOINT_MAX_MESSAGE_BYTES"), cfg.MaxMessageBytes,
		"largest message content_json or effect output, in `bytes` (env SAVEPOINT_MAX_MESSAGE_BYTES)")
	fs.IntVar(&cfg.MaxStateBytes, name("max-state-bytes", "SAVEPOINT_MAX_STATE_BYTES"), cfg.MaxStateBytes,
		"largest state_json, in `bytes` (env SAVEPOINT_MAX_STATE_BYTES)")
	fs.IntVar(&cfg.ResponseBudgetBytes, name("response-budget-bytes", "SAVEPOINT_RESPONSE_BUDGET_BYTES"), cfg.ResponseBudgetBytes,
		"`bytes` of checkpoint and messages in one response before the rest is paged (env SAVEPOINT_RESPONSE_BUDGET_BYTES)")
	fs.DurationVar(&cfg.ShutdownTimeout, name("shutdown-timeout", "SAVEPOINT_SHUTDOWN_TIMEOUT"), cfg.ShutdownTimeout,
		"graceful stop deadline (env SAVEPOINT_SHUTDOWN_TIMEOUT)")
	fs.Uint64Var(&cfg.Store.DiskReserveBytes, name("disk-reserve-bytes", "SAVEPOINT_DISK_RESERVE_BYTES"), cfg.Store.DiskReserveBytes,
		"free `bytes` the data directory's filesystem keeps; below it writes get DISK_FULL (0: 144 MiB) (env SAVEPOINT_DISK_RESERVE_BYTES)")
	fs.BoolVar(&cfg.Store.AcceptDataLoss, name("accept-data-loss", "SAVEPOINT_ACCEPT_DATA_LOSS"), cfg.Store.AcceptDataLoss,
		"serve a store that is behind its high-water mark, logging what was lost (env SAVEPOINT_ACCEPT_DATA_LOSS)")
	fs.DurationVar(&cfg.RetainCompleted, name("retain-completed", "SAVEPOINT_RETAIN_COMPLETED"), cfg.RetainCompleted,
		"delete a completed or failed session this `long` after its completion; 0 keeps it (env SAVEPOINT_RETAIN_COMPLETED)")
	fs.DurationVar(&cfg.RetainIdle, name("retain-idle", "SAVEPOINT_RETAIN_IDLE"), cfg.RetainIdle,
		"delete a session not updated, and a graph thread not written, for this `long`; 0 keeps them (env SAVEPOINT_RETAIN_IDLE)")
	fs.IntVar(&cfg.RetainRevisions, name("retain-revisions", "SAVEPOINT_RETAIN_REVISIONS"), cfg.RetainRevisions,
		"keep only each session's last `N` revisions and the messages they reach, the ledger whole; 0 keeps all (env SAVEPOINT_RETAIN_REVISIONS)")
	fs.DurationVar(&cfg.GCInterval, name("gc-interval", "SAVEPOINT_GC_INTERVAL"), cfg.GCInterval,
		"time between passes of retention and value-log GC (0: 10m) (env SAVEPOINT_GC_INTERVAL)")
	fs.Var((*byteSize)(&cfg.MemoryLimit), name("memory-limit", "SAVEPOINT_MEMORY_LIMIT"),
		"the Go runtime's soft memory `limit`, in bytes or with a KiB, MiB or GiB suffix; GOMEMLIMIT, when set, wins (env SAVEPOINT_MEMORY_LIMIT)")
	fs.TextVar(&cfg.LogLevel, name("log-level", "SAVEPOINT_LOG_LEVEL"), cfg.LogLevel,
		"least `level` logged: debug, info, warn or error (env SAVEPOINT_LOG_LEVEL)")
	lists := addSecurityFlags(fs, cfg, name)
	showVersion := fs.Bool("version", false, "print the version and exit")
	return daemonFlags{fs: fs, envVars: envVars, lists: lists, version: showVersion}
}

// modeValue is a flag.Value for permission bits written in octal.
type modeValue os.FileMode

func (m *modeValue) String() string { return fmt.Sprintf("%#o", uint32(*m)) }

func (m *modeValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("%q is not an octal mode such as 0600", s)
	}
	*m = modeValue(n)
	return nil
}

// byteSize is a flag.Value for a size in bytes, written as a number with an
// optional B, KiB, MiB or GiB suffix, as GOMEMLIMIT is.
type byteSize int64

func (b *byteSize) String() string {
	switch n := int64(*b); {
	case n != 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	default:
		return strconv.FormatInt(n, 10)
	}
}

func (b *byteSize) Set(s string) error {
	num, shift := s, 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("%q is not a size such as 64MiB or 67108864", s)
	}
	*b = byteSize(n << shift)
	return nil
}
