// Package daemon is savepointd: the domain types of Savepoint's checkpoint
// protocol, the Store interface that persists them, the gRPC adapter that
// serves a Store, and Run, which serves one until its context is cancelled.
package daemon
