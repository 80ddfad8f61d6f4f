package pgstore_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestBackupUnsupported: the Backup RPC on a PostgreSQL store is refused
// with ErrBackupUnsupported (UNIMPLEMENTED, BACKUP_UNSUPPORTED), naming the
// database's own tools, and writes nothing.
func TestBackupUnsupported(t *testing.T) {
	s := open(t, pgtest.Shared(t).URL("postgres"), newSchema())
	var buf bytes.Buffer
	_, err := s.BackupSince(ctx, &buf, 0, true)
	if !errors.Is(err, core.ErrBackupUnsupported) {
		t.Fatalf("BackupSince: %v, want ErrBackupUnsupported", err)
	}
	if st := rpc.ToStatus(err); st.Code().String() != "Unimplemented" {
		t.Errorf("status %v, want Unimplemented", st.Code())
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %d bytes", buf.Len())
	}
}
