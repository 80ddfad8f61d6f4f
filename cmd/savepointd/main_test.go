package main

import (
	"bytes"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigPrecedence(t *testing.T) {
	env := map[string]string{
		"SAVEPOINT_DATA_DIR":              "/env/data",
		"SAVEPOINT_ADDR":                  "unix:/env/s.sock",
		"SAVEPOINT_SOCKET_MODE":           "0660",
		"SAVEPOINT_MAX_REQUEST_BYTES":     "4000000",
		"SAVEPOINT_MAX_MESSAGE_BYTES":     "1000000",
		"SAVEPOINT_MAX_STATE_BYTES":       "500000",
		"SAVEPOINT_RESPONSE_BUDGET_BYTES": "2000000",
		"SAVEPOINT_SHUTDOWN_TIMEOUT":      "3s",
		"SAVEPOINT_LOG_LEVEL":             "debug",
		"SAVEPOINT_MEMORY_LIMIT":          "96MiB",
		"SAVEPOINT_RETAIN_COMPLETED":      "168h",
		"SAVEPOINT_RETAIN_IDLE":           "720h",
		"SAVEPOINT_RETAIN_REVISIONS":      "20",
		"SAVEPOINT_GC_INTERVAL":           "5m",
		"SAVEPOINT_LOG_FILE":              "/env/savepointd.log",
		"SAVEPOINT_LOG_FILE_MAX_SIZE":     "1MiB",
	}
	cfg, err := parseConfig(nil, envOf(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := config{Config: daemon.Config{
		DataDir: "/env/data", Listen: "unix:/env/s.sock", SocketMode: 0o660,
		MaxRequestBytes: 4000000, MaxMessageBytes: 1000000, MaxStateBytes: 500000, ResponseBudgetBytes: 2000000,
		ShutdownTimeout: 3 * time.Second, LogLevel: slog.LevelDebug, MemoryLimit: 96 << 20,
		RetainCompleted: 168 * time.Hour, RetainIdle: 720 * time.Hour, RetainRevisions: 20, GCInterval: 5 * time.Minute,
	}, LogFile: "/env/savepointd.log", LogFileMaxBytes: 1 << 20}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("from env: %+v, want %+v", cfg, want)
	}

	cfg, err = parseConfig([]string{
		"--data-dir", "/flag/data", "--listen", "127.0.0.1:7000", "--socket-mode", "600",
		"--max-request-bytes", "3000000", "--max-message-bytes", "900000", "--max-state-bytes", "400000",
		"--response-budget-bytes", "1000000", "--shutdown-timeout", "1s", "--log-level", "warn",
		"--memory-limit", "100000000", "--retain-completed", "1h", "--retain-idle", "2h", "--retain-revisions", "3", "--gc-interval", "1m",
		"--log-file", "/flag/savepointd.log", "--log-file-max-size", "2048",
	}, envOf(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want = config{Config: daemon.Config{
		DataDir: "/flag/data", Listen: "127.0.0.1:7000", SocketMode: 0o600,
		MaxRequestBytes: 3000000, MaxMessageBytes: 900000, MaxStateBytes: 400000, ResponseBudgetBytes: 1000000,
		ShutdownTimeout: time.Second, LogLevel: slog.LevelWarn, MemoryLimit: 100000000,
		RetainCompleted: time.Hour, RetainIdle: 2 * time.Hour, RetainRevisions: 3, GCInterval: time.Minute,
	}, LogFile: "/flag/savepointd.log", LogFileMaxBytes: 2048}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("flags over env: %+v, want %+v", cfg, want)
	}

	t.Setenv("SAVEPOINT_ADDR", "unix:/tmp/default.sock")
	cfg, err = parseConfig(nil, envOf(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if def := defaultConfig(); !reflect.DeepEqual(cfg, def) {
		t.Errorf("defaults: %+v, want %+v", cfg, def)
	}
}

// TestMemoryLimit checks that --memory-limit (default 80 MiB) is the soft
// limit savepointd sets, unless GOMEMLIMIT is set, and what sizes it takes.
func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want int64 // -1: none set by savepointd
		err  string
	}{
		{nil, nil, daemon.DefaultMemoryLimit, ""},
		{[]string{"--memory-limit", "1GiB"}, nil, 1 << 30, ""},
		{[]string{"--memory-limit", "65536KiB"}, nil, 64 << 20, ""},
		{[]string{"--memory-limit", "100000000B"}, nil, 100000000, ""},
		{[]string{"--memory-limit", "1GiB"}, map[string]string{"GOMEMLIMIT": "2GiB"}, -1, ""},
		{nil, map[string]string{"GOMEMLIMIT": "off"}, -1, ""},
		{[]string{"--memory-limit", "lots"}, nil, 0, "not a size"},
		{[]string{"--memory-limit", "-5MiB"}, nil, 0, "not a size"},
		{[]string{"--memory-limit", "9999999999GiB"}, nil, 0, "not a size"},
		{[]string{"--memory-limit", "16MiB"}, nil, 0, "memory limit"},
	}
	for _, tt := range tests {
		tt.env = maps.Clone(tt.env)
		if tt.env == nil {
			tt.env = map[string]string{}
		}
		tt.env["SAVEPOINT_ADDR"] = "unix:/tmp/sp.sock"
		var stderr bytes.Buffer
		cfg, err := parseConfig(tt.args, envOf(tt.env), &stderr)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.err) {
				t.Errorf("%q: %v, want an error saying %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		limit, ok := memoryLimit(cfg, envOf(tt.env))
		if got := map[bool]int64{true: limit, false: -1}[ok]; got != tt.want {
			t.Errorf("%q with %v: limit %d, want %d", tt.args, tt.env, got, tt.want)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "unix:" + filepath.Join(t.TempDir(), "s.sock")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		says string
	}{
		{"unknown flag", []string{"--nope"}, nil, exitConfig, "nope"},
		{"extra argument", []string{"--listen", sock, "serve"}, nil, exitConfig, `unexpected arguments ["serve"]`},
		{"a daemon flag to a command", []string{"verify", "--listen", sock}, nil, exitConfig, "savepointd verify: flag provided but not defined: -listen (savepointd verify -h lists the flags)"},
		{"bad env", []string{"--listen", sock}, map[string]string{"SAVEPOINT_MAX_STATE_BYTES": "lots"}, exitConfig, "SAVEPOINT_MAX_STATE_BYTES"},
		{"bad mode", []string{"--listen", sock, "--socket-mode", "0777"}, nil, exitConfig, "socket mode"},
		{"negative retain idle", []string{"--listen", sock, "--retain-idle", "-1h"}, nil, exitConfig, "retain idle"},
		{"not loopback", []string{"--listen", "0.0.0.0:7000"}, nil, exitConfig, "loopback"},
		{"request over the store's sizing", []string{"--listen", sock, "--max-request-bytes", "8388608"}, nil, exitConfig, "sized for"},
		{"store fails", []string{"--listen", sock, "--data-dir", file}, nil, exitFail, "open store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, envOf(tt.env), io.Discard, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("stderr does not say %q:\n%s", tt.says, stderr.String())
			}
		})
	}
}

func TestRunLocked(t *testing.T) {
	dir := t.TempDir()
	st, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stderr bytes.Buffer
	sock := "unix:" + filepath.Join(t.TempDir(), "s.sock")
	if code := run([]string{"--data-dir", dir, "--listen", sock}, envOf(nil), io.Discard, &stderr); code != exitLocked {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitLocked, stderr.String())
	}
	if !strings.Contains(stderr.String(), "lock") || !strings.Contains(stderr.String(), dir) {
		t.Errorf("stderr does not name the lock:\n%s", stderr.String())
	}
}
