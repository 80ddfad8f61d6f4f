package badgerstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// filesHolding returns the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file a background checkpoint renamed (the log's mark, the tables list)
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			found = append(found, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func randomText(t *testing.T, n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestEncryptedFilesHoldNoPlaintext saves a small message (kept in the
// write-ahead log, then in a table) and one over ValueThreshold (kept in the
// value log), and looks for their text in every file of the directory, while
// open and after Close has flushed the memtable to a table. Without a key,
// the same search finds the text: the search is what would see a leak.
func TestEncryptedFilesHoldNoPlaintext(t *testing.T) {
	for _, tt := range []struct {
		name string
		key  []byte
	}{
		{"plain", nil},
		{"aes256", bytes.Repeat([]byte{7}, 32)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			small, large := "small-"+randomText(t, 32), "large-"+randomText(t, 32)
			s, err := Open(dir, Options{EncryptionKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			big := `"` + large + strings.Repeat("x", ValueThreshold+1) + `"`
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", StateJSON: `{"note":"` + small + `"}`,
				AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + small + `"`}, {Role: "user", ContentJSON: big}}}); err != nil {
				t.Fatal(err)
			}
			open := map[string][]string{"small": filesHolding(t, dir, small), "large": filesHolding(t, dir, large)}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			closed := map[string][]string{"small": filesHolding(t, dir, small), "large": filesHolding(t, dir, large)}
			ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(ssts) == 0 {
				t.Fatal("Close wrote no table: the search did not cover one")
			}
			for _, m := range []map[string][]string{open, closed} {
				for what, files := range m {
					if tt.key == nil && len(files) == 0 {
						t.Errorf("unencrypted: the %s message's text is in no file; the search cannot see a leak", what)
					}
					if tt.key != nil && len(files) > 0 {
						t.Errorf("encrypted: the %s message's text is in the clear in %v", what, files)
					}
				}
			}
			if tt.key == nil && !slices.ContainsFunc(open["large"], func(f string) bool { return strings.HasSuffix(f, ".seg") }) {
				t.Errorf("unencrypted: the large message's text is in no segment of the write-ahead log (%v); the search does not cover the log", open["large"])
			}
			t.Logf("plaintext found while open: %v; after close: %v", open, closed)

			s, err = Open(dir, Options{EncryptionKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ms, err := s.Messages(ctx, "s", 0, 0, 4<<20, 0)
			if err != nil || len(ms) != 2 || ms[1].ContentJSON != big {
				t.Fatalf("reopened: %d messages, %v", len(ms), err)
			}
		})
	}
}

func TestEncryptionKeyMismatchRefused(t *testing.T) {
	keyA, keyB := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 24)
	for _, tt := range []struct {
		name         string
		create, open []byte
		want         string
	}{
		{"key for a plain directory", nil, keyA, "is not encrypted and an encryption key was given"},
		{"no key for an encrypted directory", keyA, nil, "is encrypted and no key was given"},
		{"wrong key", keyA, keyB, "is encrypted with another key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{EncryptionKey: tt.create})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			_, err = Open(dir, Options{EncryptionKey: tt.open})
			if !errors.Is(err, ErrEncryptionKey) {
				t.Fatalf("Open = %v, want ErrEncryptionKey", err)
			}
			for _, want := range []string{tt.want, "savepointd backup", "savepointd restore"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if err := CheckEncryptionKey(dir, tt.open); !errors.Is(err, ErrEncryptionKey) {
				t.Errorf("CheckEncryptionKey = %v, want ErrEncryptionKey", err)
			}
			// The refusal released the lock and changed nothing.
			s, err = Open(dir, Options{EncryptionKey: tt.create})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Checkpoint(ctx, "s", 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name    string
		content []byte
		mode    os.FileMode
		wantErr string
	}{
		{"aes128", bytes.Repeat([]byte{1}, 16), 0o600, ""},
		{"aes192", bytes.Repeat([]byte{1}, 24), 0o400, ""},
		{"aes256", bytes.Repeat([]byte{1}, 32), 0o600, ""},
		{"hex text", []byte(strings.Repeat("ab", 32) + "\n"), 0o600, "holds more than 32 bytes"},
		{"short", []byte("0123456789"), 0o600, "holds 10 bytes"},
		{"empty", nil, 0o600, "holds 0 bytes"},
		{"group readable", bytes.Repeat([]byte{1}, 32), 0o640, "chmod 600"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tt.mode)
			key, err := ReadKeyFile(path)
			if tt.wantErr == "" {
				if err != nil || !bytes.Equal(key, tt.content) {
					t.Fatalf("ReadKeyFile = %x, %v", key, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ReadKeyFile error = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
