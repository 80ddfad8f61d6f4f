//go:build savepoint_nosync

package wal

// skipSync is set by the savepoint_nosync build, a deliberately broken daemon
// built only by the power-cut harness (daemon/crashtest); see the
// badgerstore package's file of the same build tag.
const skipSync = true
