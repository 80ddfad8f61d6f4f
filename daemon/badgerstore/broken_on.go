//go:build savepoint_broken

package badgerstore

// brokenAckBeforeSync makes this build acknowledge every write before it is
// committed and ignore sync errors: a deliberately broken daemon, built only
// by the crash harness to show that the harness reports the loss.
const brokenAckBeforeSync = true
