package pgstore

import (
	"context"
	"fmt"
	"io"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// BackupSince always fails with core.ErrBackupUnsupported (UNIMPLEMENTED,
// reason BACKUP_UNSUPPORTED): a PostgreSQL store is backed up with the
// database's own tools, which see every daemon's writes, not through one
// savepointd.
func (s *Store) BackupSince(ctx context.Context, w io.Writer, since uint64, plaintext bool) (core.BackupResult, error) {
	return core.BackupResult{}, fmt.Errorf("%w: the PostgreSQL store is backed up with the database's own tools, such as pg_dump of schema %q", core.ErrBackupUnsupported, s.schema)
}
