package main

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:s3cret@db.example:5432/sp?sslmode=verify-full", "postgres://u:xxxxx@db.example:5432/sp?sslmode=verify-full"},
		{"postgresql://u@/sp?host=/run/postgresql&password=s3cret", "postgresql://u@/sp?host=%2Frun%2Fpostgresql&password=xxxxx"},
		{"postgres://u@/sp?host=/run/postgresql", "postgres://u@/sp?host=/run/postgresql"},
		{"postgres://u:s3cret@host:port:bad/db", "(an unparsable URL)"},
	} {
		if got := redactURL(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValidateStoreURL(t *testing.T) {
	for _, tc := range []struct {
		cfg  storeConfig
		says string // empty: valid
	}{
		{storeConfig{URL: "postgres://u@h/db"}, ""},
		{storeConfig{URL: "postgresql://u@h/db", DiskReserveBytes: 0}, ""},
		{storeConfig{URL: "host=h dbname=db"}, "postgres://"},
		{storeConfig{URL: "postgres://u@h/db", DiskReserveBytes: 1 << 30}, "disk reserve"},
		{storeConfig{URL: "postgres://u@h/db", AcceptDataLoss: true}, "accept data loss"},
		{storeConfig{URL: "postgres://u@h/db", EncryptionKeyFile: "/k"}, "encryption key file"},
		{storeConfig{DiskReserveBytes: 1 << 30, AcceptDataLoss: true}, ""},
	} {
		err := errors.Join(tc.cfg.validate()...)
		if (tc.says == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.says)
		}
	}
}
