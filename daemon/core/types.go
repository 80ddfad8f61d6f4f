package core

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"sync"
	"time"
)

// EffectClass says what running a tool does to the world outside.
// The zero value is SideEffect, the safe assumption.
type EffectClass int

const (
	// SideEffect tools change the world and must not run twice.
	SideEffect EffectClass = iota
	// ReadOnly tools only read: re-running one is always safe.
	ReadOnly
	// Idempotent tools change the world, but running one twice with the same
	// idempotency key has the effect of running it once.
	Idempotent
)

func (c EffectClass) String() string {
	switch c {
	case ReadOnly:
		return "READ_ONLY"
	case Idempotent:
		return "IDEMPOTENT"
	default:
		return "SIDE_EFFECT"
	}
}

// Message is one entry of a session's history: a role and the provider's
// content as JSON text.
type Message struct {
	Role        string
	ContentJSON string
}

// ToolUse is a tool call the model named; it is pending until a save clears it.
type ToolUse struct {
	ID        string
	Name      string
	InputJSON string
	Class     EffectClass
	// BeginTracked promises that the client calls BeginEffect before running
	// the tool, so a call never begun can be re-run after a crash.
	BeginTracked bool
	// Repeatable exempts the call from the duplicate-intent guard: it may
	// legitimately repeat an earlier call with the same name and input.
	Repeatable bool
}

// Effect is the ledger record of a finished tool use.
type Effect struct {
	ToolUseID string
	Name      string
	Output    string
	IsError   bool
	// RecordTime is set by the store; zero on input.
	RecordTime time.Time
	// Late reports that the record arrived after the call stopped being
	// pending; set by the store.
	Late bool
	// Refused reports that the call was refused before it ran: it never
	// ran, and IsError is set.
	Refused bool
	// Resolution is set when a DONE resolution recorded the effect; nil for
	// one RecordEffect recorded. Stores keep it in the call's record.
	Resolution *EffectResolution
	// RequestID is a RecordEffect's request id (AIP-155), input only: its
	// retry is answered as the first call was (Record). Never stored in the
	// ledger.
	RequestID string
}

// Fingerprint is a digest of the record request e is in session sid,
// everything but its request id.
func (e Effect) Fingerprint(sid string) []byte {
	var flags uint64
	if e.IsError {
		flags |= 1
	}
	if e.Refused {
		flags |= 2
	}
	return digest("record", sid, e.ToolUseID, e.Name, e.Output, flags)
}

// SameOutcome reports whether e and o record the same outcome of one call.
func (e Effect) SameOutcome(o Effect) bool {
	return e.ToolUseID == o.ToolUseID && e.Name == o.Name && e.Output == o.Output && e.IsError == o.IsError && e.Refused == o.Refused
}

// Checkpoint is one revision of a session, without its messages.
type Checkpoint struct {
	SessionID       string
	Revision        uint64
	Epoch           uint64 // the session's current epoch, not the one at save time
	Task            string
	Turn            uint32
	TokensUsed      uint64
	MessageCount    uint64
	PendingToolUses []ToolUse
	StateJSON       string
	Labels          map[string]string
	SaveTime        time.Time
	// Status, FinalOutput and CompleteTime are the session's now, like
	// Epoch: set by CompleteSession, cleared by a reopening Resume.
	Status       SessionStatus
	FinalOutput  string
	CompleteTime time.Time // zero while active
	// CreateTime is the session's, as SessionSummary.CreateTime: the same
	// for every revision; zero when the store holds none.
	CreateTime time.Time
}

// SessionStatus is where a session is in its life. The zero value,
// StatusAny, is no status: in a SessionFilter it matches every session.
type SessionStatus int

const (
	StatusAny SessionStatus = iota
	// StatusActive is every session until CompleteSession.
	StatusActive
	// StatusCompleted is a session whose agent finished its task.
	StatusCompleted
	// StatusFailed is a session whose agent gave up on its task.
	StatusFailed
)

func (s SessionStatus) String() string {
	switch s {
	case StatusActive:
		return "ACTIVE"
	case StatusCompleted:
		return "COMPLETED"
	case StatusFailed:
		return "FAILED"
	default:
		return "ANY"
	}
}

// CompleteRequest is one CompleteSession call, already validated.
type CompleteRequest struct {
	SessionID   string
	Epoch       uint64        // fenced like a save's
	Status      SessionStatus // StatusCompleted or StatusFailed
	FinalOutput string
	RequestID   string // empty disables retry detection
}

// Fingerprint is a digest of everything in the request but its request id;
// it differs from every SaveRequest's, whose first field is a length.
func (r *CompleteRequest) Fingerprint() []byte {
	b := []byte("complete\x00")
	str := func(s string) { b = append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...) }
	str(r.SessionID)
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Status))
	str(r.FinalOutput)
	sum := sha256.Sum256(b)
	return sum[:]
}

// CompleteResult is what CompleteSession returns, and what a retry of it
// returns again.
type CompleteResult struct {
	Revision uint64
	Epoch    uint64
	Status   SessionStatus
	// Already reports that the session had this status and final output.
	Already bool
}

// ForkRequest is one ForkSession call, already validated.
type ForkRequest struct {
	SourceID  string
	Revision  uint64 // 0: the source's latest
	NewID     string
	RequestID string // empty disables retry detection
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *ForkRequest) Fingerprint() []byte {
	return digest("fork", r.SourceID, r.Revision, r.NewID)
}

// RewindRequest is one RewindSession call, already validated.
type RewindRequest struct {
	SessionID string
	Epoch     uint64 // fenced like a save's
	Revision  uint64 // the kept revision to make the latest again
	RequestID string // empty disables retry detection
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *RewindRequest) Fingerprint() []byte {
	return digest("rewind", r.SessionID, r.Epoch, r.Revision)
}

// digest hashes a request kind's fields, each string length-prefixed.
func digest(kind string, fields ...any) []byte {
	b := append([]byte(kind), 0)
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			b = append(binary.BigEndian.AppendUint64(b, uint64(len(v))), v...)
		case uint64:
			b = binary.BigEndian.AppendUint64(b, v)
		}
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// BranchResult is what ForkSession and RewindSession return: the revision
// made, and the side effects (calls not read-only) of the source performed
// after the revision branched from.
type BranchResult struct {
	Revision     uint64
	Epoch        uint64
	MessageCount uint64
	// PerformedAfter are the effects recorded after the revision's save.
	PerformedAfter []LedgerEntry
	// InDoubtAfter are the calls begun after it with no recorded effect.
	InDoubtAfter []LedgerEntry
}

// BackupResult is what a backup wrote.
type BackupResult struct {
	// Encrypted reports that the file is encrypted with the store's key.
	Encrypted bool
	// Next is the since version of the next incremental backup.
	Next uint64
}

// SessionFilter selects the sessions ListSessions returns; the zero value
// selects every live session.
type SessionFilter struct {
	Labels map[string]string // the session's labels include every pair
	Status SessionStatus     // StatusAny: every status
	// HasPendingToolUses keeps only sessions with a pending tool use.
	HasPendingToolUses bool
	// UpdatedBefore keeps only sessions last updated before it; zero: any.
	UpdatedBefore time.Time
}

// LedgerEntry is what the ledger knows of one tool use of a session.
type LedgerEntry struct {
	ToolUseID           string
	Name                string
	Class               EffectClass
	BeginTracked        bool
	LastPendingRevision uint64
	Begun               bool
	IdempotencyKey      string    // set when Begun
	BeginTime           time.Time // zero when not Begun
	Effect              *Effect   // nil when not recorded
	// Registered reports that BeginEffect with a tool use entered the call,
	// rather than a save making it pending.
	Registered bool
	// Resolution is how the call was settled while in doubt; nil when it
	// never was. With a DONE resolution Effect holds the output found.
	Resolution *EffectResolution
	// InputDigest is InputDigest of the call's name and input, set when a
	// save or a registration enters the call; nil for an entry written
	// before the duplicate-intent guard, which the guard ignores.
	InputDigest []byte
	// Repeatable is the call's ToolUse.Repeatable.
	Repeatable bool
	// RunEpoch and RunRevision are the session's epoch and latest revision
	// when the call was first begun, or recorded if it never was: the run
	// and the turn window it belongs to. RunRevision 0: neither yet.
	RunEpoch, RunRevision uint64
	// DuplicateOf is, for a call the duplicate-intent guard caught, the
	// earlier call it repeats; the call was not run.
	DuplicateOf string
	// PendingSince is the first revision a save made the call pending in;
	// 0 for a call only registered. With LastPendingRevision it tells
	// whether two calls were in one saved model reply.
	PendingSince uint64
	// Approval is the call's approval record, for a call that requires
	// approval; nil otherwise.
	Approval *EffectApproval
	// EarlierResolutions and EarlierApprovals are the resolutions and the
	// approval decisions that Resolution and Approval replaced, oldest
	// first, bounded by MaxDecisions.
	EarlierResolutions []EffectResolution
	EarlierApprovals   []EffectApproval
}

// MaxAppendMessages and MaxPendingToolUses bound the records one save
// writes, which a store must fit in one transaction.
const (
	MaxAppendMessages  = 1000
	MaxPendingToolUses = 256
)

// SaveRequest is one SaveCheckpoint call, already validated.
type SaveRequest struct {
	SessionID        string
	ExpectedRevision uint64 // 0 creates the session
	Epoch            uint64 // 0 is accepted only while the session was never resumed
	RequestID        string // empty disables retry detection
	Task             string
	Turn             uint32
	TokensUsed       uint64
	KeepMessages     *uint64 // nil keeps every stored message
	AppendMessages   []Message
	PendingToolUses  []ToolUse
	StateJSON        string
	Labels           map[string]string
}

// Fingerprint is a digest of everything in the request but its request id,
// so a retry can be told from a reuse of the id for a different save.
func (r *SaveRequest) Fingerprint() []byte {
	n := 128 + len(r.SessionID) + len(r.Task) + len(r.StateJSON)
	for _, m := range r.AppendMessages {
		n += 16 + len(m.Role) + len(m.ContentJSON)
	}
	for _, t := range r.PendingToolUses {
		n += 40 + len(t.ID) + len(t.Name) + len(t.InputJSON)
	}
	for k, v := range r.Labels {
		n += 16 + len(k) + len(v)
	}
	bp := fingerprintBufs.Get().(*[]byte)
	defer fingerprintBufs.Put(bp)
	b := slices.Grow((*bp)[:0], n)
	defer func() { *bp = b }()
	str := func(s string) { b = append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...) }
	num := func(v uint64) { b = binary.BigEndian.AppendUint64(b, v) }
	flag := func(f bool) {
		if f {
			num(1)
		} else {
			num(0)
		}
	}
	str(r.SessionID)
	num(r.ExpectedRevision)
	num(r.Epoch)
	str(r.Task)
	num(uint64(r.Turn))
	num(r.TokensUsed)
	flag(r.KeepMessages != nil)
	if r.KeepMessages != nil {
		num(*r.KeepMessages)
	}
	num(uint64(len(r.AppendMessages)))
	for _, m := range r.AppendMessages {
		str(m.Role)
		str(m.ContentJSON)
	}
	num(uint64(len(r.PendingToolUses)))
	for _, t := range r.PendingToolUses {
		str(t.ID)
		str(t.Name)
		str(t.InputJSON)
		num(uint64(t.Class))
		flag(t.BeginTracked)
	}
	str(r.StateJSON)
	keys := slices.Sorted(maps.Keys(r.Labels))
	num(uint64(len(keys)))
	for _, k := range keys {
		str(k)
		str(r.Labels[k])
	}
	// Repeatable calls, added after the format above was fixed, are encoded
	// only when there are any, so remembered request ids of saves without
	// them keep their fingerprints.
	for i, t := range r.PendingToolUses {
		if t.Repeatable {
			str("repeatable")
			num(uint64(i))
		}
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// fingerprintBufs holds the buffers Fingerprint encodes a request into.
var fingerprintBufs = sync.Pool{New: func() any { return new([]byte) }}

// SaveResult is what a save returns, and what a retry of it returns again.
type SaveResult struct {
	Revision     uint64
	MessageCount uint64
	Epoch        uint64
}

// BeginResult is what BeginEffect returns.
type BeginResult struct {
	IdempotencyKey string
	AlreadyBegun   bool
	// Effect is, for Register only, the call's recorded effect: the call
	// must not run, and nothing was written.
	Effect *Effect
	// Decision is DecisionRun when the call is begun, DecisionReuse with
	// Effect, and DecisionAwaitApproval or DecisionDenied for a call that
	// requires approval and is not begun; with Duplicate, DecisionReuse
	// (the earlier call's effect is recorded) or DecisionInDoubt.
	Decision Decision
	// Approval is the call's approval record, for a call that requires
	// approval.
	Approval *EffectApproval
	// Duplicate is set when the duplicate-intent guard caught the call: it
	// must not run; IdempotencyKey is empty.
	Duplicate *Duplicate
}

// Duplicate names the earlier call of an interrupted run that a new call
// repeats, as it is now.
type Duplicate struct {
	ToolUseID      string
	Epoch          uint64 // the epoch it was begun (or recorded) under
	IdempotencyKey string // empty when never begun
	// Effect is its recorded effect; nil while it is in doubt.
	Effect *Effect
	// ToolResultText is DuplicateText for the new call: the tool result to
	// give the model; IsError says whether it is an error result.
	ToolResultText string
	IsError        bool
}

// RegisterRequest is one BeginEffect call with a tool use, already
// validated: the call is entered in the ledger if it is not there, and
// begun.
type RegisterRequest struct {
	SessionID string
	ToolUse   ToolUse
	Epoch     uint64 // fenced like a save's
	RequestID string // empty disables retry detection
	// RequiresApproval gates the begin on an approval for the tool use's
	// input.
	RequiresApproval bool
}

// Fingerprint is a digest of everything in the request but its request id.
func (r *RegisterRequest) Fingerprint() []byte {
	kind := "register"
	if r.RequiresApproval {
		kind = "register-approved"
	}
	if r.ToolUse.Repeatable {
		return digest(kind, r.SessionID, r.Epoch, r.ToolUse.ID, r.ToolUse.Name, r.ToolUse.InputJSON, uint64(r.ToolUse.Class), "repeatable")
	}
	return digest(kind, r.SessionID, r.Epoch, r.ToolUse.ID, r.ToolUse.Name, r.ToolUse.InputJSON, uint64(r.ToolUse.Class))
}

// PendingToolUse is a pending tool use with what the ledger knows of it.
type PendingToolUse struct {
	ToolUse
	Begun          bool
	IdempotencyKey string // set when Begun
	Effect         *Effect
	Resolution     *EffectResolution // nil when never resolved
	Approval       *EffectApproval   // nil for a call that requires no approval
}

// SessionSummary describes a session's latest revision.
type SessionSummary struct {
	SessionID           string
	Revision            uint64
	Epoch               uint64
	Task                string
	Turn                uint32
	MessageCount        uint64
	PendingToolUseCount uint32
	// InDoubtToolUseCount is how many pending tool uses Reconcile would decide
	// DecisionInDoubt now; every pending tool use when they cannot be read.
	InDoubtToolUseCount uint32
	Labels              map[string]string
	CreateTime          time.Time
	UpdateTime          time.Time
	Status              SessionStatus
	// ResolvedByVerify and ResolvedByPerson count the calls in doubt
	// ResolveEffect settled in the session, by resolver kind.
	ResolvedByVerify, ResolvedByPerson uint32
	// AwaitingApproval counts the calls waiting for approval.
	AwaitingApproval uint32
}

// VerifyReport is what a full check of a store found.
type VerifyReport struct {
	CheckedSessions uint64
	CheckedRecords  uint64
	Damaged         []DamagedSession // in session id order; empty when all verified
}

// DamagedSession names a damaged session and its first problem.
type DamagedSession struct {
	SessionID string // empty for damage outside any session
	Problem   string
}
