package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
)

// TestOfflineCommandsCreateNothing: the commands that read a stopped
// daemon's store refuse a --data-dir that does not exist, or holds no store,
// with exit 2 naming it, and leave it as it was; restore refuses a backup
// file that does not exist before it creates its new directory.
func TestOfflineCommandsCreateNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(dir string) []string
	}{
		{"verify", func(dir string) []string { return []string{"verify", "--data-dir", dir} }},
		{"repair-manifest", func(dir string) []string { return []string{"repair-manifest", "--data-dir", dir} }},
		{"backup", func(dir string) []string {
			return []string{"backup", filepath.Join(t.TempDir(), "b"), "--data-dir", dir}
		}},
		{"migrate-store", func(dir string) []string {
			return []string{"migrate-store", "--data-dir", dir, "--to", "postgres://127.0.0.1:1/db"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "typo")
			empty := t.TempDir()
			for _, c := range []struct {
				dir, says string
			}{
				{missing, "data directory " + missing + " does not exist"},
				{empty, "data directory " + empty + " holds no store"},
			} {
				var stderr bytes.Buffer
				code := run(tc.args(c.dir), envOf(nil), io.Discard, &stderr)
				if code != exitConfig || !strings.Contains(stderr.String(), c.says) || strings.Count(stderr.String(), "\n") != 1 {
					t.Errorf("%s: exit %d (want %d); stderr does not say %q in one line:\n%s", c.dir, code, exitConfig, c.says, stderr.String())
				}
			}
			if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s was created: %v", missing, err)
			}
			if entries, _ := os.ReadDir(empty); len(entries) != 0 {
				t.Errorf("%s was written: %v", empty, entries)
			}
		})
	}
	t.Run("restore", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "new")
		missing := filepath.Join(t.TempDir(), "full.bak")
		var stderr bytes.Buffer
		code := run([]string{"restore", "--data-dir", target, missing}, envOf(nil), io.Discard, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), "backup file "+missing+" does not exist") {
			t.Errorf("exit %d (want %d); stderr:\n%s", code, exitConfig, stderr.String())
		}
		if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created: %v", target, err)
		}
	})
}

// TestPostgresTakesTheDataDirLock: with --store-url, savepointd takes the
// same per-host lock in --data-dir as the embedded store
// (badgerstore.LockDir), before it reaches for the database.
func TestPostgresTakesTheDataDirLock(t *testing.T) {
	dir := t.TempDir()
	held, err := badgerstore.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := config{Config: daemon.Config{DataDir: dir}, Store: storeConfig{URL: "postgres://127.0.0.1:1/db?connect_timeout=1"}}
	_, _, err = openPostgres(cfg, slog.New(slog.DiscardHandler), false)
	if !errors.Is(err, badgerstore.ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, badgerstore.LockFile)) {
		t.Fatalf("openPostgres with the lock held: %v, want ErrLocked naming %s", err, badgerstore.LockFile)
	}
}
