package badgerstore

import (
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// TestMigrateFormat4 checks the migration to format 5: a format 4
// directory, whose heads have no entries in the index by update time, gets
// them at Open, so ListSessionsByUpdate lists every live session, the last
// updated first; Verify reads the entries as records.
func TestMigrateFormat4(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := s.DeleteSession(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	// Back to format 4: no index, format record 4.
	err := s.update(func(t *tx) error {
		for _, k := range keysWithPrefixLimit(t.r, []byte{kindUpdated}, -1) {
			t.delete(k)
		}
		return put(t, formatKey, &storagev1.FormatRecord{Version: 4})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, []byte{kindUpdated}); n != 0 {
		t.Fatalf("%d index entries left", n)
	}
	s.Close()

	s = openT(t, dir)
	defer s.Close()
	sums, err := s.ListSessionsByUpdate(ctx, core.UpdateCursor{}, 10, core.SessionFilter{})
	var ids []string
	for _, x := range sums {
		ids = append(ids, x.SessionID)
	}
	if err != nil || strings.Join(ids, ",") != "c,a" {
		t.Fatalf("after the migration: %v %v, want c,a", ids, err)
	}
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestByUpdateSkipsStrayEntries checks that an index entry its head does
// not name (a stale time, or no live head) lists nothing: the index never
// invents or repeats a session.
func TestByUpdateSkipsStrayEntries(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "a"}); err != nil {
		t.Fatal(err)
	}
	err := s.update(func(t *tx) error {
		if err := put(t, updatedKey(time.Now().Add(time.Hour), "a"), &storagev1.UpdateIndexRecord{}); err != nil {
			return err
		}
		return put(t, updatedKey(time.Now(), "ghost"), &storagev1.UpdateIndexRecord{})
	})
	if err != nil {
		t.Fatal(err)
	}
	sums, err := s.ListSessionsByUpdate(ctx, core.UpdateCursor{}, 10, core.SessionFilter{})
	if err != nil || len(sums) != 1 || sums[0].SessionID != "a" {
		t.Fatalf("with stray entries: %+v %v, want a once", sums, err)
	}
}
