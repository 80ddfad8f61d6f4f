package daemon

import (
	"fmt"
	"net/url"
	"strings"
)

// StoreKindPostgres is StoreInfo.Kind of the PostgreSQL store.
const StoreKindPostgres = "postgres"

// IsPostgresURL reports whether a store URL selects PostgreSQL.
func IsPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// validateStore refuses a store URL of another kind, and, with PostgreSQL,
// the settings of the embedded store that do not apply to it.
func (c Config) validateStore() []error {
	if c.StoreURL == "" {
		return nil
	}
	if !IsPostgresURL(c.StoreURL) {
		return []error{fmt.Errorf("store url: %q is neither empty (the embedded store in --data-dir) nor a postgres:// or postgresql:// URL",
			RedactURL(c.StoreURL))}
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

// RedactURL returns u with its password, in the URL or as a password
// parameter, replaced by "xxxxx", for logs and error messages.
func RedactURL(u string) string {
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
