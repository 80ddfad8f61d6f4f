// Package daemon is savepointd: the gRPC adapter that validates requests,
// translates them to package core's types and serves a core.Store, and Run,
// which serves one until its context is cancelled.
package daemon
