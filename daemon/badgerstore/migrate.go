package badgerstore

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// migrate brings an older format up to FormatVersion. Format 1 had no commit
// sequence number; every commit now writes one, so its migration is the
// commit of the new format record.
func (s *Store) migrate() error {
	var version uint32
	var empty bool
	err := s.view(context.Background(), func(t *tx) error {
		var rec storagev1.FormatRecord
		found, err := get(t, nil, "", formatKey, &rec)
		if err != nil {
			return fmt.Errorf("%w: format record: %v", ErrFormat, err)
		}
		if !found {
			it := t.r.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			it.Rewind()
			if empty = !it.Valid(); !empty {
				return fmt.Errorf("%w: the directory holds data but no format version", ErrFormat)
			}
		}
		version = rec.GetVersion()
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case version > FormatVersion:
		return fmt.Errorf("%w: the directory is in format %d, this savepointd reads up to %d; run a newer savepointd",
			ErrFormat, version, FormatVersion)
	case version == FormatVersion:
		return nil
	case !empty:
		s.log.Info("migrating the data directory", "from_format", version, "to_format", FormatVersion)
	}
	if err := s.moveRequestIDs(); err != nil {
		return fmt.Errorf("migrate to format %d: %w", FormatVersion, err)
	}
	return s.update(func(t *tx) error {
		return put(t, formatKey, &storagev1.FormatRecord{Version: FormatVersion})
	})
}

// moveRequestIDs is the migration to format 3: each request id kept in a
// session's head moves to its own record, a session per commit. It can be
// interrupted and run again: a moved head no longer holds any.
func (s *Store) moveRequestIDs() error {
	sids, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool {
		return len(h.RecentRequests) > 0 //nolint:staticcheck // reading the old format
	})
	if err != nil {
		return err
	}
	for _, sid := range sids {
		err := s.update(func(t *tx) error {
			var h storagev1.SessionRecord
			if _, err := get(t, nil, sid, sessionKey(sid), &h); err != nil {
				return err
			}
			for _, r := range h.RecentRequests { //nolint:staticcheck // reading the old format
				if err := put(t, requestKey(sid, r.RequestId), r); err != nil {
					return err
				}
			}
			h.RecentRequests = nil //nolint:staticcheck // clearing the old format
			return put(t, sessionKey(sid), &h)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
