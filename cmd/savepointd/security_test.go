package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func TestParseSecurityFlags(t *testing.T) {
	env := map[string]string{
		"SAVEPOINT_ALLOW_UID":           "5,6",
		"SAVEPOINT_ALLOW_GID":           "7",
		"SAVEPOINT_ENCRYPTION_KEY_FILE": "/env/key",
		"SAVEPOINT_METRICS_ADDR":        "127.0.0.1:9100",
		"SAVEPOINT_LOG_FORMAT":          "json",
	}
	cfg, err := parseConfig(nil, envOf(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.AllowUIDs, []uint32{5, 6}) || !slices.Equal(cfg.AllowGIDs, []uint32{7}) ||
		cfg.Store.EncryptionKeyFile != "/env/key" || cfg.MetricsAddr != "127.0.0.1:9100" || cfg.LogFormat != "json" {
		t.Errorf("from env: %+v", cfg)
	}
	// Flags replace the environment's lists; repeats and commas add up; names resolve.
	cfg, err = parseConfig([]string{"--allow-uid", "1000,1001", "--allow-uid", "root", "--allow-gid", "root"}, envOf(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.AllowUIDs, []uint32{1000, 1001, 0}) || !slices.Equal(cfg.AllowGIDs, []uint32{0}) {
		t.Errorf("flags: uids %v gids %v, want [1000 1001 0] [0]", cfg.AllowUIDs, cfg.AllowGIDs)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--allow-uid", "no-such-user-here"}, "neither a number nor a known name"},
		{[]string{"--allow-gid", "99999999999"}, "neither a number"},
		{[]string{"--listen", "0.0.0.0:7000"}, "needs mutual TLS"},
		{[]string{"--metrics-addr", "0.0.0.0:9100"}, "--metrics-allow-remote"},
		{[]string{"--log-format", "yaml"}, "neither text nor json"},
		{[]string{"--listen", "127.0.0.1:7000", "--allow-uid", "1"}, "has no uid or gid"},
	} {
		if _, err := parseConfig(tt.args, envOf(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%v: %v, want an error saying %q", tt.args, err, tt.says)
		}
	}
}

func writeKey(t *testing.T, b byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, bytes.Repeat([]byte{b}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEncryptionExitCodes: savepointd, verify and repair-manifest refuse a
// key that does not fit the directory with exitData and the way to convert;
// backup and restore convert it.
func TestEncryptionExitCodes(t *testing.T) {
	bin := daemontest.Binary(t)
	keyA, keyB := writeKey(t, 1), writeKey(t, 2)
	dir := t.TempDir()
	st, err := badgerstore.Open(dir, badgerstore.Options{EncryptionKey: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveCheckpoint(context.Background(), &core.SaveRequest{SessionID: "s", Task: "converted"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	badKey := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(badKey, []byte("short"), 0o600)
	sock := "unix:" + filepath.Join(t.TempDir(), "s.sock")
	backup := filepath.Join(t.TempDir(), "backup")
	plain := filepath.Join(t.TempDir(), "plain")

	for _, tt := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"serve without key", []string{"--data-dir", dir, "--listen", sock}, exitData, "savepointd backup"},
		{"serve with wrong key", []string{"--data-dir", dir, "--listen", sock, "--encryption-key-file", keyB}, exitData, "another key"},
		{"bad key file", []string{"--data-dir", dir, "--listen", sock, "--encryption-key-file", badKey}, exitConfig, "16, 24 or 32"},
		{"verify without key", []string{"verify", "--data-dir", dir}, exitData, "is encrypted and no key was given"},
		{"verify with key", []string{"verify", "--data-dir", dir, "--encryption-key-file", keyA}, exitOK, ""},
		{"repair without key", []string{"repair-manifest", "--data-dir", dir}, exitData, "is encrypted and no key was given"},
		{"repair with key", []string{"repair-manifest", "--data-dir", dir, "--encryption-key-file", keyA}, exitOK, ""},
		{"backup without file", []string{"backup", "--data-dir", dir}, exitConfig, "usage"},
		{"backup", []string{"backup", backup, "--data-dir", dir, "--encryption-key-file", keyA}, exitOK, ""},
		{"backup never overwrites", []string{"backup", backup, "--data-dir", dir, "--encryption-key-file", keyA}, exitFail, "never overwrites"},
		{"restore into a non-empty dir", []string{"restore", backup, "--data-dir", dir}, exitData, "not empty"},
		{"restore plain", []string{"restore", backup, "--data-dir", plain}, exitOK, ""},
		{"plain with the old key", []string{"verify", "--data-dir", plain, "--encryption-key-file", keyA}, exitData, "is not encrypted"},
		{"plain verify", []string{"verify", "--data-dir", plain}, exitOK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A separate process each: savepointd leaves Badger open at exit
			// (badgerstore.Options.ExitAfterClose).
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("stderr does not say %q:\n%s", tt.says, stderr.String())
			}
		})
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v; want mode 0600", fi, err)
	}
	st, err = badgerstore.Open(plain, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if cp, err := st.Checkpoint(context.Background(), "s", 0); err != nil || cp.Task != "converted" {
		t.Errorf("restored session: %+v, %v", cp, err)
	}
}

func TestTLSFilesCheckedAtStart(t *testing.T) {
	ca := daemontest.NewCA(t, "ca")
	cert, key := ca.Server(t, "savepointd")
	for _, tt := range []struct {
		name       string
		cert, key  string
		clientCA   string
		wantConfig string // "" for a good configuration
	}{
		{"good", cert, key, ca.CertFile, ""},
		{"missing key", cert, filepath.Join(t.TempDir(), "nope.pem"), ca.CertFile, "--tls-key"},
		{"CA file without a certificate", cert, key, key, "holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]string{"--listen", "127.0.0.1:7443", "--tls-cert", tt.cert, "--tls-key", tt.key, "--tls-client-ca", tt.clientCA},
				envOf(nil), &bytes.Buffer{})
			if tt.wantConfig == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantConfig != "" && (err == nil || !strings.Contains(err.Error(), tt.wantConfig)) {
				t.Fatalf("parseConfig: %v, want an error saying %q", err, tt.wantConfig)
			}
		})
	}
}
