//go:build !savepoint_nosync

package badgerstore

// skipSync is false in every real build. The power-cut harness builds
// savepointd with -tags savepoint_nosync, whose commits skip their sync, to
// prove that it detects the writes a power loss then takes.
const skipSync = false
