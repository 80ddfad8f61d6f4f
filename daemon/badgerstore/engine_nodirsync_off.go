//go:build !savepoint_nodirsync

package badgerstore

// skipDirSync is false in every real build. The power-cut harness builds
// savepointd with -tags savepoint_nodirsync, which skips the engine's sync
// of the data directory, to prove that it detects the writes a power loss
// then takes.
const skipDirSync = false
