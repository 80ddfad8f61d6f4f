package core

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// GraphStore persists LangGraph-style checkpoints: keyed by (thread,
// namespace, checkpoint id), with opaque channel values per channel version
// and pending writes per (task id, index). Every method is safe for
// concurrent use and every write is durable before it returns. Errors wrap
// this package's sentinels (ErrRequestIDReused, ErrUploadAborted, ...).
type GraphStore interface {
	// PutCheckpoint upserts p's checkpoint and inserts each blob not stored
	// yet, in one commit. already is true when p's request id had been
	// applied before and nothing was written.
	PutCheckpoint(ctx context.Context, p *GraphPut) (already bool, err error)
	// BeginUpload starts staging p, whose values hold no data but their
	// declared Size; the caller writes the values' bytes in order and then
	// commits or aborts the upload.
	BeginUpload(ctx context.Context, p *GraphPut) (GraphUpload, error)
	// PutWrites stores w's writes: an upsert when every index is special
	// (negative), otherwise an insert of each (task id, index) not stored.
	PutWrites(ctx context.Context, w *GraphWrites) (GraphWritesResult, error)
	// BeginWritesUpload starts staging w, whose values hold no data but
	// their declared Size; the caller writes the values' bytes in order and
	// then commits, which stores them as PutWrites would, or aborts.
	BeginWritesUpload(ctx context.Context, w *GraphWrites) (GraphWritesUpload, error)
	// GetCheckpoint calls fn with the checkpoint, an empty id meaning the
	// latest; found is false, and fn is not called, when there is none. The
	// tuple's chunked values can be read only until fn returns.
	GetCheckpoint(ctx context.Context, threadID, ns, checkpointID string, fn func(*GraphTuple) error) (found bool, err error)
	// ListCheckpoints calls fn with each checkpoint q matches, newest first,
	// all read from one snapshot; fn's error stops the listing and is
	// returned.
	ListCheckpoints(ctx context.Context, q GraphListQuery, fn func(*GraphTuple) error) error
	// DeleteThread removes every namespace, checkpoint, blob and write of the
	// thread, leaving a tombstone for the late-write rule.
	DeleteThread(ctx context.Context, threadID string) error
	// DeleteForRuns removes the checkpoints whose metadata run_id is one of
	// runIDs, their writes and the blobs no kept checkpoint references, and
	// returns how many checkpoints it removed.
	DeleteForRuns(ctx context.Context, runIDs []string) (int, error)
	// CopyThread replaces target with a copy of source and returns how many
	// checkpoints it copied.
	CopyThread(ctx context.Context, source, target string) (int, error)
	// Prune applies strategy to each thread and returns how many checkpoints
	// it removed.
	Prune(ctx context.Context, threadIDs []string, strategy PruneStrategy) (int, error)
	// DeleteIdleThreads deletes, as DeleteThread does, every thread last
	// written before cutoff, and forgets the tombstones of threads deleted
	// before it; it returns how many threads it deleted. It is the graph
	// side of --retain-idle.
	DeleteIdleThreads(ctx context.Context, cutoff time.Time) (int, error)
	// ListThreads returns up to limit threads that hold a checkpoint, with
	// ids after the given one, in id (byte) order.
	ListThreads(ctx context.Context, after string, limit int) ([]GraphThread, error)
	// BeginThreadEffect applies b to the thread's ledger, as
	// ApplyThreadEffectBegin says, in one commit. A request id that started
	// an attempt before is answered as ReplayThreadEffectBegin says; a begin
	// that the late-write rule drops (its checkpoint was removed by the
	// thread's delete) stores nothing and is DecisionRun with DroppedLate.
	BeginThreadEffect(ctx context.Context, b *ThreadEffectBegin) (ThreadEffectBeginResult, error)
	// RecordThreadEffect applies r to the thread's ledger, as
	// ApplyThreadEffectRecord says, in one commit. A record of a call with
	// no entry in a thread deleted since is DroppedLate, not an error.
	RecordThreadEffect(ctx context.Context, r *ThreadEffectRecord) (ThreadEffectRecordResult, error)
	// ResolveThreadEffect applies r to the thread's ledger, as
	// ApplyThreadEffectResolve says, in one commit; a request id used
	// before for the same resolution answers with the entry as it is.
	ResolveThreadEffect(ctx context.Context, r *ThreadEffectResolve) (ThreadEffectResolveResult, error)
	// ApproveThreadEffect applies r to the thread's ledger, as
	// ApplyThreadEffectApprove says, in one commit; a request id used
	// before for the same decision answers with the entry as it is.
	ApproveThreadEffect(ctx context.Context, r *ThreadEffectApprove) (ThreadEffectApproveResult, error)
	// ListThreadEffects returns up to limit entries of the thread's ledger
	// whose keys sort after the given one (the zero key: from the first), in
	// key order, their outputs trimmed to maxOutputBytes as OutputBudget
	// says (0: every output whole), so that a listing holds at most that
	// many bytes of outputs. DeleteThread and DeleteIdleThreads remove a
	// thread's ledger, CopyThread copies it, Prune with PruneKeepLatest
	// keeps it.
	ListThreadEffects(ctx context.Context, thread string, after ThreadEffectKey, limit, maxOutputBytes int) ([]ThreadEffect, error)
}

// GraphThread describes one thread of a GraphStore.
type GraphThread struct {
	ThreadID string
	// UpdateTime is the thread's last write: a put, writes, a copy into it.
	UpdateTime time.Time
}

// GraphUpload is an upload being staged. Exactly one of Commit and Abort
// ends it; Abort after Commit does nothing.
type GraphUpload interface {
	// Write stages the next bytes of the values, in order.
	Write(ctx context.Context, p []byte) error
	// Commit makes the checkpoint visible, with its blobs, in one commit,
	// once every declared byte has been written. already is as for
	// PutCheckpoint.
	Commit(ctx context.Context) (already bool, err error)
	// Abort removes what was staged.
	Abort()
}

// GraphWritesUpload is an upload of writes being staged, as GraphUpload is
// of a checkpoint; Commit's result is PutWrites'.
type GraphWritesUpload interface {
	// Write stages the next bytes of the values, in order.
	Write(ctx context.Context, p []byte) error
	// Commit stores the writes in one commit, once every declared byte has
	// been written.
	Commit(ctx context.Context) (GraphWritesResult, error)
	// Abort removes what was staged.
	Abort()
}

// GraphValue is one serialized value: its serializer's type tag and its
// bytes, held in Data or, for a large stored value, read in pieces by Each.
type GraphValue struct {
	Type string
	// Size is the value's length; for a value in memory, len(Data).
	Size int64
	Data []byte
	each func(yield func([]byte) error) error
}

// ChunkedGraphValue returns a value of size bytes whose bytes each yields in
// order; a store makes one for a value it reads in pieces.
func ChunkedGraphValue(typ string, size int64, each func(yield func([]byte) error) error) GraphValue {
	return GraphValue{Type: typ, Size: size, each: each}
}

// Each calls yield with the value's bytes, in one or more pieces.
func (v GraphValue) Each(yield func([]byte) error) error {
	if v.each != nil {
		return v.each(yield)
	}
	if len(v.Data) == 0 {
		return nil
	}
	return yield(v.Data)
}

// GraphCheckpoint is one checkpoint without its channel values.
type GraphCheckpoint struct {
	ThreadID string
	NS       string
	ID       string
	ParentID string // "" for none
	// Value is the checkpoint serialized without its channel values.
	Value           GraphValue
	ChannelVersions map[string]string
	// MetadataJSON is a JSON object, as given.
	MetadataJSON string
}

// GraphBlob is one channel's value at one version.
type GraphBlob struct {
	Channel string
	Version string
	Value   GraphValue
}

// GraphWrite is one pending write of a task.
type GraphWrite struct {
	TaskID   string
	TaskPath string
	Idx      int32
	Channel  string
	Value    GraphValue
}

// GraphPut is a PutCheckpoint or an upload: a checkpoint and the blobs new
// in it.
type GraphPut struct {
	Checkpoint GraphCheckpoint
	Blobs      []GraphBlob
	// RequestID is a canonical UUID, or "" for no retry detection.
	RequestID string
}

// GraphWrites is one PutWrites call: writes of one task to one checkpoint.
type GraphWrites struct {
	ThreadID     string
	NS           string
	CheckpointID string
	TaskID       string
	TaskPath     string
	// Writes have TaskID and TaskPath of the call.
	Writes    []GraphWrite
	RequestID string
}

// GraphWritesResult says what PutWrites stored.
type GraphWritesResult struct {
	// Written counts the writes stored or replaced.
	Written int
	// DroppedLate is true when the writes were dropped by the late-write
	// rule: the thread was deleted after their checkpoint was made.
	DroppedLate bool
	// AlreadyApplied is true when the request id had been applied before.
	AlreadyApplied bool
}

// GraphTuple is a checkpoint with its blobs, in channel order, and its
// pending writes, sorted by (TaskPath, TaskID, Idx).
type GraphTuple struct {
	Checkpoint GraphCheckpoint
	Blobs      []GraphBlob
	Writes     []GraphWrite
}

// GraphListQuery selects checkpoints for ListCheckpoints.
type GraphListQuery struct {
	// ThreadID is "" for every thread.
	ThreadID string
	// NS is nil for every namespace.
	NS *string
	// Before keeps ids less than it (byte order); "" keeps all.
	Before string
	// Filter keeps checkpoints whose metadata has each key with an equal
	// JSON value (as decoded by DecodeJSONValue).
	Filter map[string]any
	// Limit is the most checkpoints returned; 0 means no limit.
	Limit int
}

// PruneStrategy says what Prune keeps.
type PruneStrategy int

const (
	// PruneKeepLatest keeps each namespace's latest checkpoint, its writes
	// and the blobs it references.
	PruneKeepLatest PruneStrategy = iota + 1
	// PruneDelete removes the threads.
	PruneDelete
)

// The special write indexes of LangGraph: a call whose writes all have one
// replaces earlier writes with the same (task id, index).
const (
	GraphIdxError     = -1
	GraphIdxScheduled = -2
	GraphIdxInterrupt = -3
	GraphIdxResume    = -4
)

// IsUpsert reports whether w's writes replace stored ones: every index is
// special.
func (w *GraphWrites) IsUpsert() bool {
	for _, x := range w.Writes {
		if x.Idx >= 0 {
			return false
		}
	}
	return len(w.Writes) > 0
}

// SortGraphWrites sorts writes by (TaskPath, TaskID, Idx).
func SortGraphWrites(ws []GraphWrite) {
	slices.SortStableFunc(ws, func(a, b GraphWrite) int {
		if a.TaskPath != b.TaskPath {
			return strings.Compare(a.TaskPath, b.TaskPath)
		}
		if a.TaskID != b.TaskID {
			return strings.Compare(a.TaskID, b.TaskID)
		}
		return int(a.Idx) - int(b.Idx)
	})
}

// DecodeJSONValue decodes JSON text into the form metadata values are
// compared in: numbers as float64, objects as map[string]any.
func DecodeJSONValue(s string) (any, error) {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// MetadataMatches reports whether the JSON object metadataJSON has each of
// filter's keys with an equal decoded value. Metadata that does not decode
// as an object matches only an empty filter.
func MetadataMatches(metadataJSON string, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	var md map[string]json.RawMessage
	if json.Unmarshal([]byte(metadataJSON), &md) != nil {
		return false
	}
	for k, want := range filter {
		raw, ok := md[k]
		if !ok {
			return false
		}
		got, err := DecodeJSONValue(string(raw))
		if err != nil || !reflect.DeepEqual(got, want) {
			return false
		}
	}
	return true
}

// MetadataRunID returns the metadata's top-level "run_id" string, or "".
func MetadataRunID(metadataJSON string) string {
	var md struct {
		RunID any `json:"run_id"`
	}
	if json.Unmarshal([]byte(metadataJSON), &md) != nil {
		return ""
	}
	s, _ := md.RunID.(string)
	return s
}

// Fingerprint returns a digest of the put's payload for retry detection,
// open so that a store can add an upload's bytes as they arrive.
func (p *GraphPut) Fingerprint() hash.Hash {
	h := sha256.New()
	c := p.Checkpoint
	writeStrings(h, "put", c.ThreadID, c.NS, c.ID, c.ParentID, c.Value.Type, c.MetadataJSON)
	writeValue(h, c.Value)
	for _, k := range slices.Sorted(maps.Keys(c.ChannelVersions)) {
		writeStrings(h, k, c.ChannelVersions[k])
	}
	for _, b := range p.Blobs {
		writeStrings(h, b.Channel, b.Version, b.Value.Type)
		writeValue(h, b.Value)
	}
	return h
}

// Fingerprint returns a digest of the call's payload for retry detection.
func (w *GraphWrites) Fingerprint() []byte { return w.digest().Sum(nil) }

func (w *GraphWrites) digest() hash.Hash {
	h := sha256.New()
	writeStrings(h, "writes", w.ThreadID, w.NS, w.CheckpointID, w.TaskID, w.TaskPath)
	for _, x := range w.Writes {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(x.Idx)))
		writeStrings(h, x.Channel, x.Value.Type)
		writeValue(h, x.Value)
	}
	return h
}

func writeStrings(h hash.Hash, ss ...string) {
	for _, s := range ss {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
}

func writeValue(h hash.Hash, v GraphValue) {
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(v.Size)))
	h.Write(v.Data)
}

// GraphReplay decides a graph write's request id: already is true when the
// id was applied before with the same fingerprint fp (stored is the
// fingerprint remembered for it, found whether the id was remembered), and
// an id used before for another write is an error wrapping
// ErrRequestIDReused. An empty id is never a retry.
func GraphReplay(thread, requestID string, stored []byte, found bool, fp []byte) (already bool, err error) {
	if requestID == "" || !found {
		return false, nil
	}
	if string(stored) != string(fp) {
		return false, fmt.Errorf("%w: request id %s was already used for a different write to thread %q; make a new id for a new write",
			ErrRequestIDReused, requestID, thread)
	}
	return true, nil
}

// LateWrite is the late-write rule: once a thread has been deleted holding
// checkpoint ids up to deletedThrough, a pending write for a checkpoint id
// not above it is dropped, unless that checkpoint has been stored again
// (which the caller checks only when LateWrite is true).
func LateWrite(deleted bool, deletedThrough, checkpointID string) bool {
	return deleted && checkpointID <= deletedThrough
}
