//go:build savepoint_nosync

package badgerstore

// skipSync makes this build's commits skip their sync (db.Sync) and
// acknowledge writes still only in the page cache: a deliberately broken
// daemon, built only by the power-cut harness (tests/crashtest) to show
// that it reports the acknowledged writes a power loss then takes, which a
// kill -9 cannot show because the page cache survives it.
const skipSync = true
