// Package integration holds the end-to-end tests of the daemon host: each
// starts savepointd, in process (daemon.Run on a Badger or PostgreSQL store)
// or as the built binary (tests/daemontest), and drives it over gRPC, raw
// or through the Go client: the API's rules, bad input, fencing, access
// control, TLS, logging, metrics, systemd notification, retention and the
// graph conformance suite (daemon/graphtest) on both stores.
//
// They live outside daemon/ so that nothing under daemon/ depends on a
// client or on these harnesses (daemon/core's TestDaemonImportsNoClientNorTests).
// The package has no API; everything is in its _test.go files.
package integration
