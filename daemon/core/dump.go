package core

// SessionDump is everything a store keeps of one session, tombstone or
// live, in the stores' shared terms: what savepointd migrate-store copies
// from one store into another. The Store interface cannot express it (a
// copy through it would renumber epochs, restamp begin and record times,
// change idempotency keys and drop request ids and tombstones).
type SessionDump struct {
	SessionID string
	// Deleted marks a tombstone: only Epoch and UpdateTime are set.
	Deleted bool
	HeadRecord
	Revisions []RevisionRecord // kept revisions, in revision order
	Messages  []SeqMessage     // stored messages, in sequence order
	Ledger    []LedgerEntry    // every ledger entry, in tool use id order
	Requests  []RequestRecord  // remembered request ids, in id order
}

// Segment is a run of Count stored messages from sequence number FirstSeq.
type Segment struct{ FirstSeq, Count uint64 }

// SeqMessage is a stored message and its sequence number.
type SeqMessage struct {
	Seq uint64
	Message
}
