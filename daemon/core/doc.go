// Package core is Savepoint's domain: the types of the checkpoint protocol
// (sessions, revisions, epochs, effects, pending tool uses, graph threads),
// the errors every store returns, the Store and GraphStore interfaces that
// badgerstore and pgstore implement, and the protocol's rules, written once:
// Save, Begin, Record, Resume, Complete and Rewind run on a store's
// transaction through the small Txn interface, so the stores cannot disagree
// on fencing, revision checks, request-id replay or the ledger's first-wins.
// It imports no transport: the gRPC adapter in package rpc translates the
// API's messages to these types and back.
package core
