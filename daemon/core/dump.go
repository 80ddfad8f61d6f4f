package core

import "time"

// SessionDump is everything a store keeps of one session, tombstone or
// live, in the stores' shared terms: what savepointd migrate-store copies
// from one store into another. The Store interface cannot express it (a
// copy through it would renumber epochs, restamp begin and record times,
// change idempotency keys and drop request ids and tombstones).
type SessionDump struct {
	SessionID string
	// Deleted marks a tombstone: only Epoch and UpdateTime are set.
	Deleted      bool
	Epoch        uint64
	Resumed      bool   // the session was resumed at least once
	Revision     uint64 // the latest revision
	NextSeq      uint64 // the sequence number the next stored message gets
	Task         string
	Turn         uint32
	MessageCount uint64
	PendingCount uint32
	Labels       map[string]string
	CreateTime   time.Time
	UpdateTime   time.Time
	Status       SessionStatus // StatusActive, StatusCompleted or StatusFailed
	FinalOutput  string
	CompleteTime time.Time
	Revisions    []RevisionDump // kept revisions, in revision order
	Messages     []SeqMessage   // stored messages, in sequence order
	Calls        []LedgerEntry  // every call record, in tool use id order
	Requests     []RequestDump  // remembered request ids, in id order
}

// RevisionDump is one kept revision as stored: its history is the
// messages in Segments, in order.
type RevisionDump struct {
	Revision     uint64
	Epoch        uint64 // the epoch it was saved at
	Task         string
	Turn         uint32
	TokensUsed   uint64
	Segments     []Segment
	MessageCount uint64
	Pending      []ToolUse
	StateJSON    string
	Labels       map[string]string
	SaveTime     time.Time
}

// Segment is a run of Count stored messages from sequence number FirstSeq.
type Segment struct{ FirstSeq, Count uint64 }

// SeqMessage is a stored message and its sequence number.
type SeqMessage struct {
	Seq uint64
	Message
}

// RequestDump is a remembered request id and the answer a retry of it gets.
type RequestDump struct {
	RequestID    string
	Fingerprint  []byte
	Revision     uint64
	MessageCount uint64
	Epoch        uint64
}
