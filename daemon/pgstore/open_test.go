package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestOpenErrors: a bad URL is ErrConfig, an unreachable server is
// ErrUnavailable, and neither error holds the password.
func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"postgres://u:s3cret@127.0.0.1:notaport/db", pgstore.ErrConfig},
		{"postgres://u:s3cret@127.0.0.1/db?sslmode=bogus", pgstore.ErrConfig},
		{"postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable", core.ErrUnavailable},
		{"postgresql://u:s3cret@/db?host=/nonexistent&port=5", core.ErrUnavailable},
	} {
		s, err := pgstore.Open(ctx, tc.url, pgstore.Options{})
		if err == nil {
			s.Close()
			t.Fatalf("%s: opened", tc.url)
		}
		t.Log(err)
		if !errors.Is(err, tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %v without the password", tc.url, err, tc.want)
		}
	}
}

// TestSchemaVersion: Open records the schema's version; a schema written by
// a newer savepointd is refused; daemons opening an empty database at once
// all succeed, and the migration is applied once.
func TestSchemaVersion(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d on an empty database: %v", i, err)
		}
	}
	c, err := pgx.Connect(ctx, srv.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n, v int
	if err := c.QueryRow(ctx, "SELECT COUNT(*), MAX(version) FROM savepoint.schema_version").Scan(&n, &v); err != nil || n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("schema_version holds %d rows up to %d (%v), want %d", n, v, err, pgstore.SchemaVersion)
	}
	if _, err := c.Exec(ctx, "INSERT INTO savepoint.schema_version (version) VALUES ($1)", pgstore.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, pgstore.ErrFormat) || !strings.Contains(err.Error(), "newer savepointd") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// TestClosed: after Close every call, Ping included, is ErrUnavailable.
func TestClosed(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := pgstore.Open(ctx, srv.URL("postgres"), pgstore.Options{Schema: newSchema()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	s.Close()
	if err := s.Ping(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("ping after close: %v", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("save after close: %v", err)
	}
}

// TestCloseUnderLoad: a Close while writers are busy answers every call,
// with its result or ErrUnavailable; none is left waiting.
func TestCloseUnderLoad(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := pgstore.Open(ctx, srv.URL("postgres"), pgstore.Options{Schema: newSchema()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprintf("w%d.%d", w, i)})
				if errors.Is(err, core.ErrUnavailable) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	s.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writers still wait 10 s after Close")
	}
}
