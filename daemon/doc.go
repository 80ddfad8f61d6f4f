// Package daemon is savepointd's host: Run serves a core.Store over gRPC
// (through the services of package rpc) until its context is cancelled,
// with the listener, TLS and peer-credential access, logging, metrics,
// retention and systemd integration around them.
package daemon
