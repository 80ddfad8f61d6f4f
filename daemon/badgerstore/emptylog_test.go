package badgerstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// TestEmptyValueLogIgnored opens a store beside an empty value-log file
// numbered after the last, as a power cut leaves the file Badger created
// at its open or at a rotation when a directory sync made its entry durable
// before anything synced its data (TestPowerCutAtFirstStart, tests/crashtest),
// and as a process that ends while Badger deletes a collected file leaves
// one; Badger alone refuses to open then ("Create a new file").
func TestEmptyValueLogIgnored(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	big := `"` + strings.Repeat("v", 2*ValueThreshold) + `"`
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: big}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	last := 0
	for _, v := range vlogs {
		if fid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(v), ".vlog")); err == nil && fid > last {
			last = fid
		}
	}
	empty := filepath.Join(dir, fmt.Sprintf("%06d.vlog", last+1))
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open beside an empty value-log file: %v", err)
	}
	defer s.Close()
	ms, err := s.Messages(ctx, "s", 1, 0, 1<<20, 10)
	if err != nil || len(ms) != 1 || ms[0].ContentJSON != big {
		t.Fatalf("messages after open: %d %v", len(ms), err)
	}
}
