package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

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
	if version < 3 && !empty {
		if err := s.moveRequestIDs(); err != nil {
			return fmt.Errorf("migrate to format 3: %w", err)
		}
	}
	if !empty {
		if err := s.toFormat4(); err != nil {
			return fmt.Errorf("migrate to format 4: %w", err)
		}
	}
	if version < 5 && !empty {
		if err := s.indexByUpdate(); err != nil {
			return fmt.Errorf("migrate to format 5: %w", err)
		}
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

// toFormat4 is the migration to format 4, a session per commit: each live
// head takes its latest revision's segments, so that a save reads no
// revision; each tombstone still marked purging gets a purge record, which
// Open then finishes; every other tombstone is listed to expire a retention
// period after its delete. It can be interrupted and run again: each step
// writes what it would write again.
func (s *Store) toFormat4() error {
	sids, err := s.sessionsWhere(func(*storagev1.SessionRecord) bool { return true })
	if err != nil {
		return err
	}
	for _, sid := range sids {
		err := s.update(func(t *tx) error {
			var h storagev1.SessionRecord
			if _, err := get(t, nil, sid, sessionKey(sid), &h); err != nil {
				return err
			}
			switch {
			case !h.Deleted:
				rec, err := revision(t, sid, &h, 0)
				if err != nil {
					return err
				}
				h.Segments = rec.Segments
				return put(t, sessionKey(sid), &h)
			case h.Purging: //nolint:staticcheck // reading format 3's mark
				return put(t, purgeKey(sid), &storagev1.PurgeRecord{Epoch: h.Epoch})
			case h.DeleteTime == nil:
				if _, pending, err := t.get(purgeKey(sid)); err != nil || pending {
					return err
				}
				deleted := h.UpdateTime.AsTime()
				h.DeleteTime = h.UpdateTime
				if err := put(t, expiryKey(deleted.Add(s.retention), sid), &storagev1.ExpiryRecord{Epoch: h.Epoch}); err != nil {
					return err
				}
				return put(t, sessionKey(sid), &h)
			}
			return nil
		})
		if err != nil {
			// A session that cannot be migrated is left as it is, for
			// Verify to report and DeleteSession to remove; the others
			// are served.
			if errors.Is(err, core.ErrCheckpointCorrupt) || errors.Is(err, core.ErrRevisionNotFound) {
				s.log.Error("a damaged session was left unmigrated", "session_id", sid, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

// indexByUpdate is the migration to format 5: each live head gets its entry
// in the index by update time, a thousand sessions per commit. Run again
// after an interruption, it writes the same entries.
func (s *Store) indexByUpdate() error {
	sids, err := s.sessionsWhere(func(h *storagev1.SessionRecord) bool { return !h.Deleted })
	if err != nil {
		return err
	}
	for len(sids) > 0 {
		batch := sids[:min(len(sids), 1000)]
		sids = sids[len(batch):]
		err := s.update(func(t *tx) error {
			for _, sid := range batch {
				h, _, err := head(t, sid)
				if err != nil || h == nil {
					continue // damaged or deleted since: Verify reports the one
				}
				if err := put(t, updatedKey(timeOf(h.UpdateTime), sid), &storagev1.UpdateIndexRecord{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sessionsWhere returns the ids of the sessions whose head (or tombstone)
// satisfies pred; a head that does not decode is left for Verify to report.
// It reads every head: only migrations use it.
func (s *Store) sessionsWhere(pred func(*storagev1.SessionRecord) bool) ([]string, error) {
	var sids []string
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			var h storagev1.SessionRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) != nil || !pred(&h) {
				continue
			}
			_, sid, _, _ := decodeKey(key)
			sids = append(sids, sid)
		}
		return nil
	})
	return sids, err
}
