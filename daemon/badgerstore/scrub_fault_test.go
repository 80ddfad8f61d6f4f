package badgerstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/ristretto/v2/z"
)

// TestFaultsAsErrors checks that reading a mapped file truncated under the
// mapping, as Badger truncates a table it deletes after a compaction, is an
// error of the scrub rather than a SIGBUS that kills savepointd (defect 13
// of docs/reliability.md).
func TestFaultsAsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "000001.sst")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close(-1)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var b byte
	err = faultsAsErrors(func() error {
		b = mf.Data[32<<10]
		return nil
	})
	if err == nil {
		t.Fatalf("reading past the truncated file's end returned %d and no error", b)
	}
}
