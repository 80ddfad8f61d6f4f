package badgerstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// ErrEncryptionKey is returned by Open and CheckEncryptionKey when the key
// given does not fit the data directory: the directory is not encrypted and
// a key was given, it is encrypted and none was given, or it is encrypted
// with another key. A directory is converted by a backup and a restore
// (savepointd backup, savepointd restore), never in place.
var ErrEncryptionKey = errors.New("encryption key does not match the data directory")

// convertHint names the way from one encryption setting to another.
const convertHint = "to encrypt, decrypt or change the key of a data directory, stop savepointd, run " +
	"'savepointd backup FILE' with the old setting and 'savepointd restore FILE' into a new directory with the new one " +
	"(docs/security.md)"

// ReadKeyFile reads an encryption key for Options.EncryptionKey: the file
// must hold exactly 16, 24 or 32 raw bytes (AES-128, -192 or -256) and be
// readable by its owner only.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	if fi.Mode()&0o077 != 0 {
		return nil, fmt.Errorf("encryption key file %s has mode %#o: others than its owner may read it; chmod 600 it",
			path, uint32(fi.Mode().Perm()))
	}
	key, err := io.ReadAll(io.LimitReader(f, 33))
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("encryption key file %s holds %s bytes; it must hold exactly 16, 24 or 32 raw bytes (AES-128, -192 or -256), "+
		"such as 'head -c 32 /dev/urandom > %s' writes", path, keyLen(len(key)), path)
}

func keyLen(n int) string {
	if n > 32 {
		return "more than 32"
	}
	return fmt.Sprint(n)
}

// CheckEncryptionKey reports, with ErrEncryptionKey, whether key (nil: none)
// does not fit the store in dir; a directory that Badger has not yet
// initialised fits any key.
func CheckEncryptionKey(dir string, key []byte) error {
	if _, err := os.Stat(filepath.Join(dir, badger.KeyRegistryFileName)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	kr, err := badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: dir, ReadOnly: true, EncryptionKey: key})
	if err == nil {
		return kr.Close()
	}
	if !errors.Is(err, badger.ErrEncryptionKeyMismatch) {
		return fmt.Errorf("%w: read the key registry of %s: %v", ErrDamaged, dir, err)
	}
	switch {
	case len(key) == 0:
		return fmt.Errorf("%w: %s is encrypted and no key was given; give its key with --encryption-key-file, or, %s",
			ErrEncryptionKey, dir, convertHint)
	case CheckEncryptionKey(dir, nil) == nil:
		return fmt.Errorf("%w: %s is not encrypted and an encryption key was given; start without --encryption-key-file, or, %s",
			ErrEncryptionKey, dir, convertHint)
	default:
		return fmt.Errorf("%w: %s is encrypted with another key than the one given; give the key it was created with, or, %s",
			ErrEncryptionKey, dir, convertHint)
	}
}
