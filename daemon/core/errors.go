package core

import (
	"errors"
	"fmt"
)

// The errors every Store and the service return, wrapped with detail. Each
// maps to one gRPC code and ErrorInfo reason (see docs/api.md).
var (
	ErrInvalidArgument        = errors.New("invalid argument")
	ErrSessionNotFound        = errors.New("session not found")
	ErrSessionExists          = errors.New("session already exists")
	ErrSessionFenced          = errors.New("session fenced")
	ErrRevisionMismatch       = errors.New("revision mismatch")
	ErrRevisionNotFound       = errors.New("revision not found")
	ErrRequestIDReused        = errors.New("request id reused")
	ErrKeepMessagesOutOfRange = errors.New("keep_messages beyond the history")
	ErrCallAlreadyRecorded    = errors.New("tool use already recorded")
	ErrCallNotPending         = errors.New("tool use not pending")
	ErrCallUnknown            = errors.New("tool use unknown")
	ErrToolNameMismatch       = errors.New("tool name mismatch")
	ErrEffectConflict         = errors.New("effect conflict")
	ErrCheckpointCorrupt      = errors.New("checkpoint corrupt")
	ErrInvalidPageToken       = errors.New("invalid page token")
	ErrUnavailable            = errors.New("store unavailable")
	ErrSessionCompleted       = errors.New("session completed")
	ErrPlaintextBackup        = errors.New("plaintext backup refused")
	ErrBackupUnsupported      = errors.New("backup not supported by this store")
	// ErrUploadAborted is returned by a graph upload's Commit when the
	// thread was deleted or copied over while the upload was staged:
	// nothing was stored.
	ErrUploadAborted = errors.New("upload aborted")
	// ErrEffectInputMismatch is returned by a thread effect's begin when
	// the tool use id was begun before with another name or input.
	ErrEffectInputMismatch = errors.New("tool use begun with another name or input")
	// ErrEffectNotBegun is returned by a thread effect's record when the
	// tool use was never begun or the attempt is not the latest one.
	ErrEffectNotBegun = errors.New("tool use attempt not begun")
	// ErrCallNotInDoubt is returned by a resolution of a tool use that is
	// not in doubt; nothing is written.
	ErrCallNotInDoubt = errors.New("tool use not in doubt")
	// ErrResolutionConflict is returned by a resolution of a tool use
	// resolved already otherwise; the first resolution stands.
	ErrResolutionConflict = errors.New("tool use resolved otherwise")
	// ErrApprovalNotWaiting is returned by an approval of a tool use that
	// cannot take a decision (begun without one, recorded, or neither
	// waiting nor pending); nothing is written.
	ErrApprovalNotWaiting = errors.New("tool use not waiting for approval")
	// ErrApprovalConflict is returned by an approval of a tool use decided
	// already otherwise; the first decision stands.
	ErrApprovalConflict = errors.New("tool use decided otherwise")
	// ErrApprovalInputMismatch is returned by an approval whose input
	// digest is not the call's; nothing is written.
	ErrApprovalInputMismatch = errors.New("approval for other input")
)

// The failures of a store on a database reached over the network, each an
// ErrUnavailable (errors.Is matches both) with a reason of its own.
var (
	// ErrCommitOutcomeUnknown is returned when the connection to the
	// database failed after COMMIT was sent and before its answer: the
	// write may or may not be stored. The same request again (its request
	// id, or its tool use id for an effect) is answered from what was
	// stored, or performed once.
	ErrCommitOutcomeUnknown = fmt.Errorf("commit outcome unknown: %w", ErrUnavailable)
	// ErrNoWritableHost is returned for a write while no host of the
	// database accepts writes (a failover): nothing was written.
	ErrNoWritableHost = fmt.Errorf("no writable database host: %w", ErrUnavailable)
)

// StateError is a conflict with the session's current state; it carries the
// revision and epoch the client should know to recover.
type StateError struct {
	Err             error // one of the sentinel errors above
	Msg             string
	CurrentRevision uint64
	CurrentEpoch    uint64
}

func (e *StateError) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.Msg) }
func (e *StateError) Unwrap() error { return e.Err }

// ErrDiskFull is returned for writes while the data directory's filesystem
// is below its free-space reserve; reads keep working and writes resume by
// themselves once space is freed.
var ErrDiskFull = errors.New("disk full")
