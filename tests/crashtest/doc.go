// Package crashtest holds Savepoint's reliability tests against the real
// savepointd binary: the crash-durability harness (kill -9 at random moments
// under concurrent clients), fault injection on the sync path with strace,
// the high-water mark against a silently truncated log, and damaged data
// files. docs/reliability.md says what each test shows.
//
// The package has no API; everything is in its _test.go files. Run the short
// forms with `go test ./tests/crashtest` and the long crash run with
// `make crashtest` (CYCLES, CLIENTS).
package crashtest
