//go:build savepoint_nodirsync

package badgerstore

// skipDirSync makes this build skip the engine's sync of the data directory
// after Badger creates a file: a deliberately broken daemon, built only by
// the power-cut harness (tests/crashtest) to show that it reports the
// acknowledged writes a power loss then takes with the file.
const skipDirSync = true
