package badgerstore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

var (
	descCommits  = prometheus.NewDesc("savepoint_store_commits_total", "Badger transactions committed and synced.", nil, nil)
	descRequests = prometheus.NewDesc("savepoint_store_write_requests_total", "Write requests made durable.", nil, nil)
	descSessions = prometheus.NewDesc("savepoint_sessions", "Live sessions (tombstones of deleted ones not counted), counted at most every 15 s.", nil, nil)
	descFiles    = prometheus.NewDesc("savepoint_store_file_bytes",
		"Disk space allocated to the data directory's Badger files by kind: lsm (tables), vlog (value log), wal (memtable logs).", []string{"kind"}, nil)
)

// Describe implements prometheus.Collector: the store's commit, sync,
// session and file-size series.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	s.eng.batchSizes.Describe(ch)
	s.eng.syncSeconds.Describe(ch)
	ch <- descCommits
	ch <- descRequests
	ch <- descSessions
	ch <- descFiles
}

// Collect implements prometheus.Collector. It counts the live sessions by
// reading every session head (at most every sessionCountTTL), and sizes the
// files from the directory.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	s.eng.batchSizes.Collect(ch)
	s.eng.syncSeconds.Collect(ch)
	st := s.eng.stats()
	ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(st.Requests))
	if n, err := s.eng.sessions.get(s.liveSessions); err == nil {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(n))
	} else {
		ch <- prometheus.NewInvalidMetric(descSessions, err)
	}
	if s.eng.dir != "" {
		for _, k := range []struct{ kind, glob string }{{"lsm", "*.sst"}, {"vlog", "*.vlog"}, {"wal", "*.mem"}} {
			ch <- prometheus.MustNewConstMetric(descFiles, prometheus.GaugeValue, float64(globBytes(s.eng.dir, k.glob)), k.kind)
		}
	}
}

func (s *Store) liveSessions() (int, error) {
	n := 0
	err := s.view(context.Background(), func(t *tx) error {
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: []byte{kindSession}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().Key()
			var h storagev1.SessionRecord
			if it.Item().Value(func(v []byte) error { return decodeValue(key, v, &h) }) == nil && !h.Deleted {
				n++
			}
		}
		return nil
	})
	return n, err
}

// globBytes is the disk space allocated to the files in dir matching
// pattern: Badger sizes its memory-mapped files ahead of their content, so
// their length overstates what they hold.
func globBytes(dir, pattern string) int64 {
	paths, _ := filepath.Glob(filepath.Join(dir, pattern))
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
	}
	return n
}

// sessionCountTTL is how long a count of the live sessions is reused: the
// count reads every session head.
const sessionCountTTL = 15 * time.Second

// cachedCount is a count reused for sessionCountTTL; concurrent scrapes
// share one recount.
type cachedCount struct {
	mu  sync.Mutex
	at  time.Time
	n   int
	err error
}

func (c *cachedCount) get(count func() (int, error)) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > sessionCountTTL || c.err != nil {
		c.n, c.err = count()
		c.at = time.Now()
	}
	return c.n, c.err
}
