package daemon

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"
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
}

// SameOutcome reports whether e and o record the same outcome of one call.
func (e Effect) SameOutcome(o Effect) bool {
	return e.ToolUseID == o.ToolUseID && e.Name == o.Name && e.Output == o.Output && e.IsError == o.IsError
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
}

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
	h := sha256.New()
	str := func(s string) { num(h, uint64(len(s))); h.Write([]byte(s)) }
	str(r.SessionID)
	num(h, r.ExpectedRevision)
	num(h, r.Epoch)
	str(r.Task)
	num(h, uint64(r.Turn))
	num(h, r.TokensUsed)
	if r.KeepMessages == nil {
		num(h, 0)
	} else {
		num(h, 1)
		num(h, *r.KeepMessages)
	}
	num(h, uint64(len(r.AppendMessages)))
	for _, m := range r.AppendMessages {
		str(m.Role)
		str(m.ContentJSON)
	}
	num(h, uint64(len(r.PendingToolUses)))
	for _, t := range r.PendingToolUses {
		str(t.ID)
		str(t.Name)
		str(t.InputJSON)
		num(h, uint64(t.Class))
		if t.BeginTracked {
			num(h, 1)
		} else {
			num(h, 0)
		}
	}
	str(r.StateJSON)
	keys := slices.Sorted(maps.Keys(r.Labels))
	num(h, uint64(len(keys)))
	for _, k := range keys {
		str(k)
		str(r.Labels[k])
	}
	return h.Sum(nil)
}

func num(h hash.Hash, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	h.Write(b[:])
}

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
}

// PendingCall is a pending tool use with what the ledger knows of it.
type PendingCall struct {
	ToolUse
	Begun          bool
	IdempotencyKey string // set when Begun
	Effect         *Effect
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
	// InDoubtToolUseCount is how many pending calls Reconcile would decide
	// DecisionInDoubt now; every pending call when they cannot be read.
	InDoubtToolUseCount uint32
	Labels              map[string]string
	UpdateTime          time.Time
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
