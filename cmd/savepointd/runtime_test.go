package main

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestRuntimeSettings checks, through the running daemon's /metrics, the
// collector's target percentage and soft memory limit savepointd sets: its
// defaults on each store, --memory-limit, and GOGC and GOMEMLIMIT, which win.
func TestRuntimeSettings(t *testing.T) {
	bin := daemontest.Binary(t)
	var pg *pgtest.Server
	storeURL := func() string {
		if pg == nil {
			pg = pgtest.Shared(t)
		}
		return pg.URL(pg.NewDatabase(t))
	}
	for _, tt := range []struct {
		name        string
		postgres    bool
		args, env   []string
		gogc, limit float64
	}{
		{"embedded", false, nil, nil, 100, daemon.DefaultMemoryLimit}, // Go's own
		{"embedded, flag", false, []string{"--memory-limit", "96MiB"}, nil, 100, 96 << 20},
		{"embedded, environment", false, []string{"--memory-limit", "96MiB"}, []string{"GOGC=150", "GOMEMLIMIT=100MiB"}, 150, 100 << 20},
		{"postgres", true, nil, nil, daemon.PostgresGCPercent, daemon.DefaultMemoryLimit},
		{"postgres, environment", true, nil, []string{"GOGC=150"}, 150, daemon.DefaultMemoryLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, tt.args...)
			if tt.postgres {
				args = append(args, "--store-url", storeURL())
			}
			// Empty GOGC and GOMEMLIMIT first, so that the test's own
			// environment cannot decide what it checks.
			d := daemontest.StartBinaryEnv(t, bin, append([]string{"GOGC=", "GOMEMLIMIT="}, tt.env...), args...)
			fams := daemontest.Scrape(t, daemontest.MetricsAddr(t, d.Stderr()))
			gogc, _ := daemontest.Value(fams, "go_gc_gogc_percent", nil)
			limit, _ := daemontest.Value(fams, "go_gc_gomemlimit_bytes", nil)
			if gogc != tt.gogc || limit != tt.limit {
				t.Errorf("go_gc_gogc_percent %v, go_gc_gomemlimit_bytes %v; want %v and %v", gogc, limit, tt.gogc, tt.limit)
			}
		})
	}
}
