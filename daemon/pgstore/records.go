package pgstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// The rows of every table are (key columns, record, checksum): record is
// the JSON encoding of one of the record types below, in bytea, and checksum
// the CRC-32C of the table's name, the key and the record, so that a record
// that is damaged, edited, or moved under another key is detected on read.
// The record types are the store's own, versioned with SchemaVersion; they
// do not follow the API's messages.

type sessionRec struct {
	Deleted      bool              `json:"deleted,omitempty"` // a tombstone: only Epoch and UpdateTime are set
	Epoch        uint64            `json:"epoch"`
	Resumed      bool              `json:"resumed,omitempty"`
	Revision     uint64            `json:"revision,omitempty"`
	NextSeq      uint64            `json:"next_seq,omitempty"`
	Task         string            `json:"task,omitempty"`
	Turn         uint32            `json:"turn,omitempty"`
	MessageCount uint64            `json:"message_count,omitempty"`
	PendingCount uint32            `json:"pending_count,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	CreateTime   int64             `json:"create_time_ns,omitempty"`
	UpdateTime   int64             `json:"update_time_ns"`
	// Status is "completed" or "failed" after CompleteSession; empty is
	// active (schema version 2 on; see lifecycle.go).
	Status       string `json:"status,omitempty"`
	FinalOutput  string `json:"final_output,omitempty"`
	CompleteTime int64  `json:"complete_time_ns,omitempty"`
	// The calls in doubt ResolveEffect settled, by resolver kind.
	ResolvedByVerify uint32 `json:"resolved_by_verify,omitempty"`
	ResolvedByPerson uint32 `json:"resolved_by_person,omitempty"`
	// The calls waiting for approval.
	AwaitingApproval uint32 `json:"awaiting_approval,omitempty"`
	// Segments locate the history of revision SegmentsRevision, so that a
	// save need not read the latest revision; a head whose SegmentsRevision
	// is not its Revision (written by an older savepointd, a rewind, a
	// fork or an import) has its segments read from the revision.
	Segments         []segment `json:"segments,omitempty"`
	SegmentsRevision uint64    `json:"segments_revision,omitempty"`
}

type segment struct {
	FirstSeq uint64 `json:"first_seq"`
	Count    uint64 `json:"count"`
}

type toolUseRec struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	InputJSON    string `json:"input_json,omitempty"`
	Class        int    `json:"class,omitempty"`
	BeginTracked bool   `json:"begin_tracked,omitempty"`
	Repeatable   bool   `json:"repeatable,omitempty"`
}

type revisionRec struct {
	Revision     uint64            `json:"revision"`
	Epoch        uint64            `json:"epoch"`
	Task         string            `json:"task,omitempty"`
	Turn         uint32            `json:"turn,omitempty"`
	TokensUsed   uint64            `json:"tokens_used,omitempty"`
	Segments     []segment         `json:"segments,omitempty"`
	MessageCount uint64            `json:"message_count,omitempty"`
	Pending      []toolUseRec      `json:"pending_tool_uses,omitempty"`
	StateJSON    string            `json:"state_json,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	SaveTime     int64             `json:"save_time_ns"`
}

type messageRec struct {
	Role        string `json:"role"`
	ContentJSON string `json:"content_json"`
}

type effectRec struct {
	Name       string `json:"name"`
	Output     string `json:"output,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	RecordTime int64  `json:"record_time_ns"`
	Late       bool   `json:"late,omitempty"`
	Refused    bool   `json:"refused,omitempty"`
}

// ledgerEntryRec is what the ledger knows of one tool use of a session: the call
// as last made pending (without its input, kept in the revision), its begin
// marker and its effect.
type ledgerEntryRec struct {
	Name                string     `json:"name"`
	Class               int        `json:"class,omitempty"`
	BeginTracked        bool       `json:"begin_tracked,omitempty"`
	LastPendingRevision uint64     `json:"last_pending_revision"`
	Begun               bool       `json:"begun,omitempty"`
	IdempotencyKey      string     `json:"idempotency_key,omitempty"`
	BeginTime           int64      `json:"begin_time_ns,omitempty"`
	Effect              *effectRec `json:"effect,omitempty"`
	Registered          bool       `json:"registered,omitempty"`
	// Resolution is how the call was settled while in doubt.
	Resolution *resolutionRec `json:"resolution,omitempty"`
	// The duplicate-intent guard's fields, as core.LedgerEntry's.
	InputDigest  []byte `json:"input_digest,omitempty"`
	Repeatable   bool   `json:"repeatable,omitempty"`
	RunEpoch     uint64 `json:"run_epoch,omitempty"`
	RunRevision  uint64 `json:"run_revision,omitempty"`
	DuplicateOf  string `json:"duplicate_of,omitempty"`
	PendingSince uint64 `json:"pending_since,omitempty"`
	// Approval is the call's approval record.
	Approval *approvalRec `json:"approval,omitempty"`
	// The resolutions and approval decisions Resolution and Approval
	// replaced, as core.LedgerEntry's.
	earlierRecs
}

// earlierRecs are a call's earlier resolutions and approvals as stored.
type earlierRecs struct {
	EarlierResolutions []resolutionRec `json:"earlier_resolutions,omitempty"`
	EarlierApprovals   []approvalRec   `json:"earlier_approvals,omitempty"`
}

func earlierRecsOf(rs []core.EffectResolution, as []core.EffectApproval) earlierRecs {
	var e earlierRecs
	for i := range rs {
		e.EarlierResolutions = append(e.EarlierResolutions, *resolutionRecOf(&rs[i]))
	}
	for i := range as {
		e.EarlierApprovals = append(e.EarlierApprovals, *approvalRecOf(&as[i]))
	}
	return e
}

func (e *earlierRecs) earlier() ([]core.EffectResolution, []core.EffectApproval) {
	var rs []core.EffectResolution
	for i := range e.EarlierResolutions {
		rs = append(rs, *e.EarlierResolutions[i].resolution())
	}
	var as []core.EffectApproval
	for i := range e.EarlierApprovals {
		as = append(as, *e.EarlierApprovals[i].approval())
	}
	return rs, as
}

// approvalRec is an approval record, numbered as core's.
type approvalRec struct {
	Status      int    `json:"status"`
	InputDigest []byte `json:"input_digest"`
	RequestTime int64  `json:"request_time_ns,omitempty"`
	DecidedBy   string `json:"decided_by,omitempty"`
	Note        string `json:"note,omitempty"`
	DecideTime  int64  `json:"decide_time_ns,omitempty"`
	Spent       bool   `json:"spent,omitempty"`
}

func approvalRecOf(a *core.EffectApproval) *approvalRec {
	if a == nil {
		return nil
	}
	return &approvalRec{Status: int(a.Status), InputDigest: a.InputDigest, RequestTime: nanosOrZero(a.RequestTime),
		DecidedBy: a.DecidedBy, Note: a.Note, DecideTime: nanosOrZero(a.DecideTime), Spent: a.Spent}
}

func (r *approvalRec) approval() *core.EffectApproval {
	if r == nil {
		return nil
	}
	return &core.EffectApproval{Status: core.ApprovalStatus(r.Status), InputDigest: r.InputDigest, RequestTime: fromNanos(r.RequestTime),
		DecidedBy: r.DecidedBy, Note: r.Note, DecideTime: fromNanos(r.DecideTime), Spent: r.Spent}
}

// resolutionRec is a ResolveEffect record, numbered as core's.
type resolutionRec struct {
	Outcome      int    `json:"outcome"`
	ResolverKind int    `json:"resolver_kind"`
	ResolvedBy   string `json:"resolved_by,omitempty"`
	Note         string `json:"note,omitempty"`
	ResolveTime  int64  `json:"resolve_time_ns"`
	RetryBegun   bool   `json:"retry_begun,omitempty"`
}

func resolutionRecOf(r *core.EffectResolution) *resolutionRec {
	if r == nil {
		return nil
	}
	return &resolutionRec{Outcome: int(r.Outcome), ResolverKind: int(r.ResolverKind), ResolvedBy: r.ResolvedBy,
		Note: r.Note, ResolveTime: nanosOrZero(r.ResolveTime), RetryBegun: r.RetryBegun}
}

func (r *resolutionRec) resolution() *core.EffectResolution {
	if r == nil {
		return nil
	}
	return &core.EffectResolution{Outcome: core.ResolutionOutcome(r.Outcome), ResolverKind: core.ResolverKind(r.ResolverKind),
		ResolvedBy: r.ResolvedBy, Note: r.Note, ResolveTime: fromNanos(r.ResolveTime), RetryBegun: r.RetryBegun}
}

type requestRec struct {
	Fingerprint  []byte `json:"fingerprint"`
	Revision     uint64 `json:"revision"`
	MessageCount uint64 `json:"message_count"`
	Epoch        uint64 `json:"epoch"`
	AlreadyBegun bool   `json:"already_begun,omitempty"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum covers the table, every key part (length-prefixed, so that parts
// cannot run into each other) and the record.
func checksum(table string, key [][]byte, record []byte) int64 {
	return int64(crc32.Update(checksumKey(table, key), castagnoli, record))
}

// checksumKey is the checksum of table and key before the record, to
// which a caller may add a last key part of its own in pieces: its length
// (sumLength), then its bytes.
func checksumKey(table string, key [][]byte) uint32 {
	c := crc32.Update(0, castagnoli, []byte(table))
	for _, k := range key {
		c = crc32.Update(sumLength(c, int64(len(k))), castagnoli, k)
	}
	return c
}

// sumLength adds the length n of a key part to the checksum c.
func sumLength(c uint32, n int64) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return crc32.Update(c, castagnoli, b[:])
}

func encode(v any) ([]byte, error) { return json.Marshal(v) }

// decode checks a row's checksum and decodes its record into v.
func decode(table string, key [][]byte, record []byte, sum int64, v any) error {
	if got := checksum(table, key, record); got != sum {
		return fmt.Errorf("%s row: checksum mismatch: stored %08x, computed %08x", table, uint32(sum), uint32(got))
	}
	if err := json.Unmarshal(record, v); err != nil {
		return fmt.Errorf("%s row: %v", table, err)
	}
	return nil
}

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func toolUseRecOf(u core.ToolUse) toolUseRec {
	return toolUseRec{ID: u.ID, Name: u.Name, InputJSON: u.InputJSON, Class: int(u.Class), BeginTracked: u.BeginTracked, Repeatable: u.Repeatable}
}

func (r toolUseRec) toolUse() core.ToolUse {
	return core.ToolUse{ID: r.ID, Name: r.Name, InputJSON: r.InputJSON, Class: core.EffectClass(r.Class), BeginTracked: r.BeginTracked, Repeatable: r.Repeatable}
}

func (r *effectRec) effect(toolUseID string) core.Effect {
	return core.Effect{ToolUseID: toolUseID, Name: r.Name, Output: r.Output, IsError: r.IsError, RecordTime: fromNanos(r.RecordTime), Late: r.Late, Refused: r.Refused}
}

// headOf is a live head in the domain's terms, with the segments given;
// the labels are shared, not copied.
func headOf(h *sessionRec, segs []core.Segment) core.HeadRecord {
	return core.HeadRecord{
		Epoch: h.Epoch, Resumed: h.Resumed, Revision: h.Revision, NextSeq: h.NextSeq,
		Task: h.Task, Turn: h.Turn, MessageCount: h.MessageCount, PendingCount: h.PendingCount,
		Labels: h.Labels, Segments: segs,
		CreateTime: fromNanos(h.CreateTime), UpdateTime: fromNanos(h.UpdateTime),
		Status: h.status(), FinalOutput: h.FinalOutput, CompleteTime: fromNanos(h.CompleteTime),
		ResolvedByVerify: h.ResolvedByVerify, ResolvedByPerson: h.ResolvedByPerson, AwaitingApproval: h.AwaitingApproval,
	}
}

// headRecOf is a live head as stored, its segments marked as its latest
// revision's.
func headRecOf(h *core.HeadRecord) *sessionRec {
	return &sessionRec{
		Epoch: h.Epoch, Resumed: h.Resumed, Revision: h.Revision, NextSeq: h.NextSeq,
		Task: h.Task, Turn: h.Turn, MessageCount: h.MessageCount, PendingCount: h.PendingCount,
		Labels: h.Labels, CreateTime: nanosOrZero(h.CreateTime), UpdateTime: nanosOrZero(h.UpdateTime),
		Status: statusRec(h.Status), FinalOutput: h.FinalOutput, CompleteTime: nanosOrZero(h.CompleteTime),
		Segments: segmentRecs(h.Segments), SegmentsRevision: h.Revision,
		ResolvedByVerify: h.ResolvedByVerify, ResolvedByPerson: h.ResolvedByPerson, AwaitingApproval: h.AwaitingApproval,
	}
}

func segmentRecs(segs []core.Segment) []segment {
	out := make([]segment, len(segs))
	for i, sg := range segs {
		out[i] = segment{FirstSeq: sg.FirstSeq, Count: sg.Count}
	}
	return out
}

func segmentsOf(segs []segment) []core.Segment {
	out := make([]core.Segment, len(segs), len(segs)+1)
	for i, sg := range segs {
		out[i] = core.Segment{FirstSeq: sg.FirstSeq, Count: sg.Count}
	}
	return out
}

func revisionRecOf(r *core.RevisionRecord) *revisionRec {
	rec := &revisionRec{
		Revision: r.Revision, Epoch: r.Epoch, Task: r.Task, Turn: r.Turn, TokensUsed: r.TokensUsed,
		Segments: segmentRecs(r.Segments), MessageCount: r.MessageCount, StateJSON: r.StateJSON,
		Labels: r.Labels, SaveTime: nanos(r.SaveTime), Pending: make([]toolUseRec, len(r.Pending)),
	}
	for i, u := range r.Pending {
		rec.Pending[i] = toolUseRecOf(u)
	}
	return rec
}

func revisionOf(r *revisionRec) core.RevisionRecord {
	rr := core.RevisionRecord{
		Revision: r.Revision, Epoch: r.Epoch, Task: r.Task, Turn: r.Turn, TokensUsed: r.TokensUsed,
		Segments: segmentsOf(r.Segments), MessageCount: r.MessageCount, StateJSON: r.StateJSON,
		Labels: r.Labels, SaveTime: fromNanos(r.SaveTime),
	}
	for _, u := range r.Pending {
		rr.Pending = append(rr.Pending, u.toolUse())
	}
	return rr
}

// ledgerEntryRecOf is a ledger entry as stored: of its tool use, only what
// RecordEffect checks (the revisions keep the input).
func ledgerEntryRecOf(c *core.LedgerEntry) *ledgerEntryRec {
	rec := &ledgerEntryRec{
		Name: c.Name, Class: int(c.Class), BeginTracked: c.BeginTracked, LastPendingRevision: c.LastPendingRevision,
		Begun: c.Begun, IdempotencyKey: c.IdempotencyKey, BeginTime: nanosOrZero(c.BeginTime), Registered: c.Registered,
		InputDigest: c.InputDigest, Repeatable: c.Repeatable, RunEpoch: c.RunEpoch, RunRevision: c.RunRevision, DuplicateOf: c.DuplicateOf, PendingSince: c.PendingSince,
	}
	if e := c.Effect; e != nil {
		rec.Effect = &effectRec{Name: e.Name, Output: e.Output, IsError: e.IsError, RecordTime: nanosOrZero(e.RecordTime), Late: e.Late, Refused: e.Refused}
	}
	rec.Resolution = resolutionRecOf(c.Resolution)
	rec.Approval = approvalRecOf(c.Approval)
	rec.earlierRecs = earlierRecsOf(c.EarlierResolutions, c.EarlierApprovals)
	return rec
}
