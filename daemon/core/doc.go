// Package core is Savepoint's domain: the types of the checkpoint protocol
// (sessions, revisions, epochs, effects, pending tool uses, graph threads),
// the errors every store returns, the rules both stores apply (fencing,
// reconcile), and the Store and GraphStore interfaces that badgerstore and
// pgstore implement. It imports no transport: the gRPC adapter in package
// daemon translates the API's messages to these types and back.
package core
