//go:build !savepoint_faults

// Package faults holds the fault hooks of savepointd's test-only builds. In
// every real build each is a constant false, so the code it guards compiles
// away. The crash and power-cut harnesses (tests/crashtest) build savepointd
// with -tags savepoint_faults and name, at link time, the faults that build
// injects (faults_on.go; tests/daemontest.BuildFaults), to prove that they
// detect the losses each fault causes.
package faults

const (
	// AckBeforeSync acknowledges every write before it is committed and
	// ignores sync errors (fault "broken").
	AckBeforeSync = false
	// SkipSync makes commits skip their sync, acknowledging writes still only
	// in the page cache, which a power loss takes and a kill -9 does not
	// (fault "nosync").
	SkipSync = false
	// SkipDirSync skips the sync of a directory after a file is created in
	// it (fault "nodirsync").
	SkipDirSync = false
	// SmallValueLog makes Badger's value-log files 1 MiB, its smallest, so
	// that value-log GC finds files to collect within seconds of load (fault
	// "smallvlog").
	SmallValueLog = false
)
