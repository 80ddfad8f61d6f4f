//go:build !savepoint_smallvlog

package badgerstore

// builtValueLogFileSize is ValueLogFileSize in every real build. The
// power-cut harness builds savepointd with -tags savepoint_smallvlog, whose
// value-log files are 1 MiB, so that value-log GC has files to collect
// within a power-cut cycle.
const builtValueLogFileSize = ValueLogFileSize
