package core

import (
	"context"
	"io"
	"time"
)

// Store persists sessions as state transitions of the checkpoint protocol.
// Every method is safe for concurrent use. Errors wrap the sentinel errors of
// this package (ErrSessionFenced, ErrCheckpointCorrupt, ...) so callers branch with
// errors.Is; a *StateError adds the session's current revision and epoch.
type Store interface {
	// SaveCheckpoint makes a new revision, durable before it returns. It checks
	// the request id, then the epoch, then the expected revision.
	SaveCheckpoint(ctx context.Context, req *SaveRequest) (SaveResult, error)
	// BeginEffect durably marks a call pending in the latest revision as
	// dispatched and returns its idempotency key, the same on every repeat.
	// A call that requires approval is begun only against an approval for
	// its input, which the begin spends (Begin).
	BeginEffect(ctx context.Context, req *BeginRequest) (BeginResult, error)
	// RecordEffect adds e to the ledger unless an effect is recorded for its
	// call already; it returns the stored effect and whether it was there.
	RecordEffect(ctx context.Context, sessionID string, e Effect) (stored Effect, already bool, err error)
	// ResolveEffect settles a call in doubt, as core.Resolve does.
	ResolveEffect(ctx context.Context, req *ResolveRequest) (ResolveResult, error)
	// ApproveEffect records a decision on a call that requires approval,
	// as core.Approve does.
	ApproveEffect(ctx context.Context, req *ApproveRequest) (ApproveResult, error)
	// Resume increments the session's epoch and returns its latest revision.
	// A completed or failed session is returned unchanged, writing nothing,
	// unless reopen is set: then it becomes active and is resumed.
	Resume(ctx context.Context, sessionID string, reopen bool) (Checkpoint, error)
	// CompleteSession sets a session's status to completed or failed, with
	// its final output, without making a revision. It checks the request id,
	// then the epoch; a session completed already with the same status and
	// output answers Already, with another is ErrSessionCompleted.
	CompleteSession(ctx context.Context, req *CompleteRequest) (CompleteResult, error)
	// Checkpoint returns a kept revision; revision 0 means the latest.
	Checkpoint(ctx context.Context, sessionID string, revision uint64) (Checkpoint, error)
	// Messages returns the messages of a revision from index start on, in
	// order, stopping before the total of their sizes (MessageSize) would
	// exceed maxBytes or the count would exceed maxCount (0: no count limit).
	// It always returns at least one message when any is left.
	Messages(ctx context.Context, sessionID string, revision, start uint64, maxBytes, maxCount int) ([]Message, error)
	// PendingToolUses returns the latest revision and its pending tool uses, each
	// with its begin marker and recorded effect.
	PendingToolUses(ctx context.Context, sessionID string) (revision uint64, calls []PendingToolUse, err error)
	// RegisterEffect enters a call in the ledger, when it is not there, and
	// begins it, in one durable write without making a revision (Register).
	RegisterEffect(ctx context.Context, req *RegisterRequest) (BeginResult, error)
	// LedgerToolUses returns the latest revision and the calls ids name, as
	// the ledger knows them (LedgerToolUses).
	LedgerToolUses(ctx context.Context, sessionID string, ids []string) (revision uint64, calls []PendingToolUse, err error)
	// ListSessions returns up to limit live sessions with ids after the given
	// one, in id order, that filter selects.
	ListSessions(ctx context.Context, after string, limit int, filter SessionFilter) ([]SessionSummary, error)
	// ListSessionsByUpdate returns up to limit live sessions that filter
	// selects, the last updated first (sessions updated at the same time in
	// id order), starting after the given position (zero: the newest). It
	// reads an index by update time, not every head.
	ListSessionsByUpdate(ctx context.Context, after UpdateCursor, limit int, filter SessionFilter) ([]SessionSummary, error)
	// Summary returns ListSessions' entry for one live session, unfiltered:
	// ErrSessionNotFound when it has no live head, and only its id when its head
	// cannot be decoded.
	Summary(ctx context.Context, sessionID string) (SessionSummary, error)
	// Effects returns up to limit entries of a live session's ledger with
	// tool use ids after the given one, in id order: every call that was
	// begun, has a recorded effect or was resolved.
	Effects(ctx context.Context, sessionID, after string, limit int) ([]LedgerEntry, error)
	// ForkSession creates req.NewID with one revision whose history, pending
	// tool uses and state are the source's revision's, and copies the ledger
	// entries (begin markers, idempotency keys, effects) of every call
	// pending in the source's revisions up to it. A request id is checked
	// first; the new session must not exist (ErrSessionExists).
	ForkSession(ctx context.Context, req *ForkRequest) (BranchResult, error)
	// RewindSession makes a new latest revision equal to req.Revision,
	// fenced like a save. Its pending tool uses keep their ledger entries, so a
	// call recorded since is reused by Reconcile instead of refused.
	RewindSession(ctx context.Context, req *RewindRequest) (BranchResult, error)
	// DeleteSession removes a session's revisions, history and ledger and
	// leaves a tombstone; it returns the tombstone's epoch.
	DeleteSession(ctx context.Context, sessionID string, epoch uint64) (tombstoneEpoch uint64, err error)
	// Verify reads every record, checking its integrity and that each live
	// session's latest revision and history are complete. Damage is reported
	// in the VerifyReport; an error means the check itself could not run.
	Verify(ctx context.Context) (VerifyReport, error)
	// BackupSince writes a backup file of the records written at or after
	// version since (0: all) to w, from one consistent snapshot while the
	// store serves, encrypted with the store's key; a store without a key
	// writes a plaintext one only when plaintext is set (ErrPlaintextBackup).
	BackupSince(ctx context.Context, w io.Writer, since uint64, plaintext bool) (BackupResult, error)
	// Ping returns nil when the store can take a write request now: the
	// request passes through the store's commit path without writing, so a
	// full disk, which still serves reads, does not fail it, while a stopped
	// or stuck commit path does (within ctx's deadline).
	Ping(ctx context.Context) error
	// Info describes the store for GetServerInfo.
	Info() StoreInfo
	// Close releases the store; no method may be called after it.
	Close() error
}

// UpdateCursor is a position in the sessions ordered by last update,
// newest first: the update time and id of the last session returned. The
// zero value is the start.
type UpdateCursor struct {
	UpdateTime time.Time
	SessionID  string
}

// StoreInfo is what a Store says about itself.
type StoreInfo struct {
	Kind   string // such as "badger"
	Format uint32 // the on-disk format version it writes
	// Location is where the store is, for a person: a data directory, or a
	// database and schema; never a password.
	Location string
	// Commits counts the transactions committed since the store opened.
	Commits uint64
	// LastCommit is the sequence number of the last commit the store found
	// durable when it opened; zero for a store that numbers none.
	LastCommit uint64
}

// Sizer is implemented by a Store that can say how many bytes it holds.
type Sizer interface {
	// Size returns the bytes the store takes where it keeps its data.
	Size(ctx context.Context) (int64, error)
}

// MessageSize is the number of bytes a message counts for against a
// response budget: its encoded size plus framing.
func MessageSize(m Message) int { return len(m.Role) + len(m.ContentJSON) + 16 }

// Reacher is implemented by a Store whose backend can be out of reach while
// it runs, such as a database server: Reachable returns nil when a round
// trip to it succeeds within ctx. savepointd reports NOT_SERVING on its
// health service while it fails, and SERVING again once it passes.
type Reacher interface {
	Reachable(ctx context.Context) error
}
