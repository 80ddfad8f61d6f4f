// Package rpc is savepointd's gRPC adapter: Server and GraphServer validate
// each request, translate it to package core's types, call a core.Store or
// core.GraphStore, and translate the result or error back. ToStatus is the
// one translation of domain errors into statuses with ErrorInfo reasons.
package rpc
