package integration_test

import (
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/internal/version"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestGetServerInfo checks that GetServerInfo reports the version and
// commit, the store and where it is and its size, the limits of the
// configuration the daemon runs with (not the defaults), when it started,
// its uptime, and its counters of saves and commits.
func TestGetServerInfo(t *testing.T) {
	before := time.Now()
	cfg := daemon.Config{
		DataDir:             t.TempDir(),
		MaxRequestBytes:     3 << 20,
		MaxMessageBytes:     1 << 20,
		MaxStateBytes:       512 << 10,
		ResponseBudgetBytes: 2 << 20,
	}
	d := daemontest.StartInProcess(t, cfg)
	after := time.Now()
	info, err := d.Client.GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetVersion() == "" || info.GetVersion() != version.String() {
		t.Errorf("version %q, want version.String() %q", info.GetVersion(), version.String())
	}
	if info.GetStoreKind() != "badger" || info.GetStoreFormat() != badgerstore.FormatVersion {
		t.Errorf("store %q format %d, want badger format %d", info.GetStoreKind(), info.GetStoreFormat(), badgerstore.FormatVersion)
	}
	got := [4]int64{info.GetMaxRequestBytes(), info.GetMaxMessageBytes(), info.GetMaxStateBytes(), info.GetResponseBudgetBytes()}
	want := [4]int64{int64(cfg.MaxRequestBytes), int64(cfg.MaxMessageBytes), int64(cfg.MaxStateBytes), int64(cfg.ResponseBudgetBytes)}
	if got != want {
		t.Errorf("limits (request, message, state, budget) %v, want %v", got, want)
	}
	if st := info.GetStartTime().AsTime(); st.Before(before.Truncate(time.Microsecond)) || st.After(after) {
		t.Errorf("start_time %v, want between %v and %v", st, before, after)
	}
	if info.GetCommit() != version.Commit() {
		t.Errorf("commit %q, want version.Commit() %q", info.GetCommit(), version.Commit())
	}
	if info.GetStoreLocation() != cfg.DataDir {
		t.Errorf("store_location %q, want the data directory %q", info.GetStoreLocation(), cfg.DataDir)
	}
	if info.StoreBytes == nil || info.GetStoreBytes() <= 0 {
		t.Errorf("store_bytes %v, want the files' size", info.StoreBytes)
	}
	if up := info.GetUptime().AsDuration(); up <= 0 || up > time.Since(before) {
		t.Errorf("uptime %v, want within %v", up, time.Since(before))
	}

	// Three saves acknowledged, one refused: three saves, and commits.
	for i := range 3 {
		if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "info", ExpectedRevision: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "info"}); err == nil {
		t.Fatal("a second create succeeded")
	}
	later, err := d.Client.GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if later.GetSaves() != info.GetSaves()+3 || later.GetCommits() < info.GetCommits()+1 {
		t.Errorf("after three saves: saves %d (was %d), commits %d (was %d)", later.GetSaves(), info.GetSaves(), later.GetCommits(), info.GetCommits())
	}
	if later.GetUptime().AsDuration() <= info.GetUptime().AsDuration() {
		t.Errorf("uptime %v, then %v", info.GetUptime().AsDuration(), later.GetUptime().AsDuration())
	}
}
