package core

import "time"

// Txn is one read-write transaction of a store over the records of one
// session, in the domain's terms: the write rules of the protocol (Save,
// Begin, Record, Resume, Complete, Rewind) run on it, so that every store applies
// the same fencing, revision checks and request-id replay. Reads return nil
// for a record that does not exist and an error wrapping ErrCheckpointCorrupt for one
// that cannot be decoded; writes are staged and take effect only if the
// store commits the transaction. A Txn is used by one goroutine.
type Txn interface {
	// Head returns the session's live head, or nil when it has none (never
	// created, or deleted).
	Head(sessionID string) (*HeadRecord, error)
	// DeletedEpoch returns the epoch the session was last deleted at, or 0;
	// a new session starts above it. Called only when Head returned nil.
	DeletedEpoch(sessionID string) (uint64, error)
	// Create claims the id of a session about to be created, before
	// anything is written under it; a store shared by several daemons fails
	// here, or at commit, for all but one concurrent creator.
	Create(sessionID string, h *HeadRecord) error
	// PutHead writes the session's head.
	PutHead(sessionID string, h *HeadRecord) error
	// LedgerEntry returns the ledger record of one tool use of the session.
	LedgerEntry(sessionID, toolUseID string) (*LedgerEntry, error)
	// PutLedgerEntry writes c under its ToolUseID.
	PutLedgerEntry(sessionID string, c *LedgerEntry) error
	// Request returns the remembered request id, or nil.
	Request(sessionID, requestID string) (*RequestRecord, error)
	// PutRequest remembers r under its RequestID.
	PutRequest(sessionID string, r *RequestRecord) error
	// PutMessages stores messages under consecutive sequence numbers from
	// first.
	PutMessages(sessionID string, first uint64, msgs []Message) error
	// PutRevision stores a new revision.
	PutRevision(sessionID string, r *RevisionRecord) error
	// Revision returns a kept revision of the session whose head is h; 0
	// means the latest. One beyond the head, or no longer kept, is an error
	// wrapping ErrRevisionNotFound.
	Revision(sessionID string, h *HeadRecord, rev uint64) (*RevisionRecord, error)
	// EachLedgerEntry calls fn with every ledger entry of the session, in tool use
	// id order, until fn returns false or an error.
	EachLedgerEntry(sessionID string, fn func(c *LedgerEntry) (more bool, err error)) error
}

// The protocol's write rules, written once for every store: each function
// reads and stages records through a Txn and returns the operation's result,
// or an error wrapping one of this package's sentinels, in which case the
// store must not commit what was staged. The checks run in the documented
// order: request id, then epoch, then status, then revision.

// HeadRecord is a live session's head: what its next write needs to know
// without reading a revision. Segments locate the latest revision's history.
type HeadRecord struct {
	Epoch        uint64
	Resumed      bool   // the session was resumed at least once
	Revision     uint64 // the latest revision
	NextSeq      uint64 // the sequence number the next stored message gets
	Task         string
	Turn         uint32
	MessageCount uint64
	PendingCount uint32
	Labels       map[string]string
	Segments     []Segment
	CreateTime   time.Time
	UpdateTime   time.Time
	Status       SessionStatus // StatusActive, StatusCompleted or StatusFailed
	FinalOutput  string
	CompleteTime time.Time // zero while active
	// ResolvedByVerify and ResolvedByPerson count the calls in doubt
	// ResolveEffect settled, by resolver kind.
	ResolvedByVerify, ResolvedByPerson uint32
	// AwaitingApproval counts the calls waiting for approval: a begin
	// asked and nobody has decided.
	AwaitingApproval uint32
}

// RevisionRecord is one kept revision as stored: its history is the
// messages in Segments, in order.
type RevisionRecord struct {
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

// RequestRecord is a remembered request id and the answer a retry of it
// gets: the digest of the request it was first used for, and that
// request's result.
type RequestRecord struct {
	RequestID    string
	Fingerprint  []byte
	Revision     uint64
	MessageCount uint64
	Epoch        uint64
	// AlreadyBegun is a BeginEffect's answer: the call was begun before.
	AlreadyBegun bool
}
