package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/internal/cli"
)

// errVersion is parseArgs's answer to --version.
var errVersion = errors.New("version requested")

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
	fs.StringVar(&cfg.LogFile, name("log-file", "SAVEPOINT_LOG_FILE"), cfg.LogFile,
		"log to this `file` (appended; also savepointd's stdout and stderr) instead of stderr, rotated at --log-file-max-size to FILE.1 (env SAVEPOINT_LOG_FILE)")
	fs.Var((*byteSize)(&cfg.LogFileMaxBytes), name("log-file-max-size", "SAVEPOINT_LOG_FILE_MAX_SIZE"),
		"`size` at which --log-file is renamed to FILE.1 (replacing the one before) and started again, in bytes or with a KiB, MiB or GiB suffix; 0: never (env SAVEPOINT_LOG_FILE_MAX_SIZE)")
	fs.BoolVar(&cfg.StartedOnDemand, name("started-on-demand", "SAVEPOINT_STARTED_ON_DEMAND"), cfg.StartedOnDemand,
		"say in GetServerInfo (savepoint info) that a client started this daemon on demand; the clients set it (env SAVEPOINT_STARTED_ON_DEMAND)")
	fs.BoolVar(&cfg.NoCallStream, name("no-call-stream", "SAVEPOINT_NO_CALL_STREAM"), cfg.NoCallStream,
		"serve no CallStreamService: clients then send every call unary (env SAVEPOINT_NO_CALL_STREAM)")
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
