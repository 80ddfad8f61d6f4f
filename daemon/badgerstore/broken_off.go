//go:build !savepoint_broken

package badgerstore

// brokenAckBeforeSync is false in every real build. The crash harness builds
// savepointd with -tags savepoint_broken to prove that it detects the losses
// of a daemon that acknowledges writes before they are durable.
const brokenAckBeforeSync = false
