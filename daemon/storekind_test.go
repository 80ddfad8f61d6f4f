package daemon_test

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:s3cret@db.example:5432/sp?sslmode=verify-full", "postgres://u:xxxxx@db.example:5432/sp?sslmode=verify-full"},
		{"postgresql://u@/sp?host=/run/postgresql&password=s3cret", "postgresql://u@/sp?host=%2Frun%2Fpostgresql&password=xxxxx"},
		{"postgres://u@/sp?host=/run/postgresql", "postgres://u@/sp?host=/run/postgresql"},
		{"postgres://u:s3cret@host:port:bad/db", "(an unparsable URL)"},
	} {
		if got := daemon.RedactURL(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValidateStoreURL(t *testing.T) {
	for _, tc := range []struct {
		cfg  daemon.Config
		says string // empty: valid
	}{
		{daemon.Config{StoreURL: "postgres://u@h/db"}, ""},
		{daemon.Config{StoreURL: "postgresql://u@h/db", DiskReserveBytes: 0}, ""},
		{daemon.Config{StoreURL: "host=h dbname=db"}, "postgres://"},
		{daemon.Config{StoreURL: "postgres://u@h/db", DiskReserveBytes: 1 << 30}, "disk reserve"},
		{daemon.Config{StoreURL: "postgres://u@h/db", AcceptDataLoss: true}, "accept data loss"},
		{daemon.Config{StoreURL: "postgres://u@h/db", EncryptionKeyFile: "/k"}, "encryption key file"},
		{daemon.Config{DiskReserveBytes: 1 << 30, AcceptDataLoss: true}, ""},
	} {
		err := tc.cfg.Validate()
		if (tc.says == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.says)
		}
	}
}
