//go:build savepoint_nodirsync

package wal

// skipDirSync is set by the savepoint_nodirsync build, a deliberately broken daemon
// built only by the power-cut harness (daemon/crashtest); see the
// badgerstore package's file of the same build tag.
const skipDirSync = true
