package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/internal/logfile"
)

// config is savepointd's configuration: the host's, which daemon.Run
// serves with, and the store's, which only the code opening the store reads.
type config struct {
	daemon.Config
	Store storeConfig
	// LogFile is the file savepointd logs to, and makes its stdout and
	// stderr, rotated at LogFileMaxBytes (internal/logfile); empty means
	// stderr as it is.
	LogFile string
	// LogFileMaxBytes is the size at which LogFile is renamed to LogFile.1
	// and started again; zero means never.
	LogFileMaxBytes int64
}

// defaultConfig returns the configuration savepointd runs with when nothing
// is set.
func defaultConfig() config {
	return config{Config: daemon.DefaultConfig(), LogFileMaxBytes: logfile.DefaultMaxBytes}
}

// validate reports every setting of c that savepointd cannot run with.
func (c config) validate() error {
	errs := c.Store.validate()
	if err := c.Config.Validate(); err != nil {
		errs = append([]error{err}, errs...)
	}
	return errors.Join(errs...)
}

// storeConfig selects the store savepointd serves and holds the settings
// only that store reads. A zero field means its default.
type storeConfig struct {
	// URL selects the store: empty means the embedded Badger store in
	// Config.DataDir; a postgres:// or postgresql:// URL means that
	// PostgreSQL database (storeHelp lists what that mode refuses).
	URL string
	// DiskReserveBytes is the free space on the data directory's filesystem
	// below which writes are refused with DISK_FULL; zero means the store's
	// default (two memtables, one value log file and 64 MiB: 144 MiB).
	DiskReserveBytes uint64
	// AcceptDataLoss serves a store that is behind its high-water mark,
	// logging what was lost; false refuses to start.
	AcceptDataLoss bool
	// EncryptionKeyFile holds the store's AES key (16, 24 or 32 raw bytes);
	// empty means the data files are not encrypted.
	EncryptionKeyFile string
}

// isPostgresURL reports whether a store URL selects PostgreSQL.
func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// validate refuses a store URL of another kind, and, with PostgreSQL, the
// settings of the embedded store that do not apply to it.
func (c storeConfig) validate() []error {
	if c.URL == "" {
		return nil
	}
	if !isPostgresURL(c.URL) {
		return []error{fmt.Errorf("store url: %q is neither empty (the embedded store in --data-dir) nor a postgres:// or postgresql:// URL",
			redactURL(c.URL))}
	}
	var errs []error
	if c.DiskReserveBytes != 0 {
		errs = append(errs, fmt.Errorf("disk reserve bytes: applies only to the embedded store; with PostgreSQL the database manages its own disk"))
	}
	if c.AcceptDataLoss {
		errs = append(errs, fmt.Errorf("accept data loss: applies only to the embedded store's high-water mark; PostgreSQL recovers by itself"))
	}
	if c.EncryptionKeyFile != "" {
		errs = append(errs, fmt.Errorf("encryption key file: applies only to the embedded store; with PostgreSQL use the database's encryption at rest and sslmode=verify-full"))
	}
	return errs
}

// redactURL returns u with its password, in the URL or as a password
// parameter, replaced by "xxxxx", for logs and error messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	q := p.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = q.Encode()
	}
	return p.String()
}
