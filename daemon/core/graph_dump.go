package core

import "time"

// GraphThreadDump is everything a store keeps of one graph thread, live or
// tombstone, in the stores' shared terms: what savepointd migrate-store
// copies from one store into another. GraphStore cannot express it (a copy
// through it would restamp put and update times and drop request ids,
// tombstones and writes to checkpoints not stored). A value whose bytes the
// store reads in pieces can be read only while the dump's callback runs.
type GraphThreadDump struct {
	ThreadID   string
	UpdateTime time.Time // the thread's last write, for --retain-idle
	// Deleted marks the tombstone of the late-write rule: the thread was
	// deleted holding checkpoint ids up to DeletedThrough.
	Deleted        bool
	DeletedThrough string
	Checkpoints    []GraphCheckpointDump // in (namespace, checkpoint id) order
	Blobs          []GraphBlobDump       // in (namespace, channel, version) order
	Writes         []GraphWriteDump      // in (namespace, checkpoint id, task id, index) order
	Requests       []GraphRequestDump    // in request id order
	Effects        []ThreadEffect        // the ledger, in (namespace, tool use id) order
}

// GraphCheckpointDump is one stored checkpoint and when it was put.
type GraphCheckpointDump struct {
	GraphCheckpoint
	PutTime time.Time
}

// GraphBlobDump is one stored channel value and its namespace.
type GraphBlobDump struct {
	NS string
	GraphBlob
}

// GraphWriteDump is one stored pending write and the checkpoint it is for.
type GraphWriteDump struct {
	NS           string
	CheckpointID string
	GraphWrite
}

// GraphRequestDump is a remembered graph request id and the digest of the
// payload it was applied with.
type GraphRequestDump struct {
	RequestID   string
	Fingerprint []byte
	// EffectAttempt is the attempt a BeginThreadEffect under this id
	// started; 0 for other writes.
	EffectAttempt uint32
}
