package pgstore_test

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestInfoAndSize checks what the store says of itself for GetServerInfo:
// its location names the database and schema but never the password, its
// commits count the group commit's transactions since Open, and its size
// is the schema's tables', growing with what is written.
func TestInfoAndSize(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	url := srv.URL("postgres")
	s := open(t, url, schema)
	info := s.Info()
	if info.Kind != "postgres" || !strings.Contains(info.Location, "/postgres schema "+schema) || strings.Contains(info.Location, "password") {
		t.Errorf("location %q of %q", info.Location, url)
	}
	if info.Commits != 0 {
		t.Errorf("commits at open: %d", info.Commits)
	}
	before, err := s.Size(ctx)
	if err != nil || before <= 0 {
		t.Fatalf("size %d, %v", before, err)
	}
	big := strings.Repeat("x", 1<<20)
	for i := range 3 {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: uint64(i),
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + big + `"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Info().Commits; n < 1 || n > 3 {
		t.Errorf("commits after three saves: %d", n)
	}
	if after, err := s.Size(ctx); err != nil || after <= before {
		t.Errorf("size after 3 MiB of messages: %d (was %d), %v", after, before, err)
	}
}
