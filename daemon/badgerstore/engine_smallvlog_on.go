//go:build savepoint_smallvlog

package badgerstore

// builtValueLogFileSize is 1 MiB in this build, Badger's smallest value-log
// file, instead of ValueLogFileSize: a test-only daemon, built only by the
// power-cut harness (tests/crashtest TestPowerCutDuringValueLogGC), whose
// value-log GC finds files to collect within seconds of load.
const builtValueLogFileSize = 1 << 20
