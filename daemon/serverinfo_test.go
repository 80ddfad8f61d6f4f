package daemon_test

import (
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/daemontest"
	"github.com/savepoint-dev/savepoint/internal/version"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestGetServerInfo checks that GetServerInfo reports the version, the
// store, the limits of the configuration the daemon runs with (not the
// defaults) and when it started.
func TestGetServerInfo(t *testing.T) {
	before := time.Now()
	cfg := daemon.Config{
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
}
