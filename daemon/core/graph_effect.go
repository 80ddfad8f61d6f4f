package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
)

// A graph thread's ledger records, for each tool call a graph node makes
// (keyed by thread, namespace and tool use id), a begin marker before the
// tool runs and its outcome the moment it returns or raises: the seed's
// protocol for agents written as graphs, whose threads are not sessions.
// ApplyThreadEffectBegin and ApplyThreadEffectRecord hold its rules; a
// GraphStore reads the entry, applies one of them and writes the result in
// one commit.

// ThreadEffectState is where the latest attempt of a thread's tool call is.
type ThreadEffectState int

const (
	// ThreadEffectBegun: begun, no outcome recorded: running now, or in
	// doubt if its process died.
	ThreadEffectBegun ThreadEffectState = iota + 1
	// ThreadEffectSucceeded: the tool returned; Output is its result.
	ThreadEffectSucceeded
	// ThreadEffectFailed: the tool raised; Output is the error as recorded.
	ThreadEffectFailed
	// ThreadEffectNotBegun: a begin that requires approval entered the
	// call and no attempt has begun (Attempts is 0); Approval says whether
	// it waits or was denied.
	ThreadEffectNotBegun
)

// Recorded reports whether the latest attempt's outcome is recorded
// (succeeded or failed), so that the entry holds an output.
func (s ThreadEffectState) Recorded() bool {
	return s == ThreadEffectSucceeded || s == ThreadEffectFailed
}

// ThreadEffect is a thread's ledger entry for one tool call.
type ThreadEffect struct {
	ThreadID  string
	NS        string
	ToolUseID string
	Name      string
	// InputJSON is the call's arguments as first begun.
	InputJSON string
	// InputDigest is ThreadEffectDigest of Name and InputJSON.
	InputDigest []byte
	// Class is the effect class as first begun.
	Class EffectClass
	// IdempotencyKey is the same for every attempt of the call.
	IdempotencyKey string
	// Attempts counts the attempts begun; the latest is number Attempts.
	Attempts uint32
	State    ThreadEffectState
	// Output is the latest attempt's outcome; zero while Begun.
	Output GraphValue
	// OutputDigest is the SHA-256 of Output.Data; nil while Begun.
	OutputDigest []byte
	BeginTime    time.Time
	RecordTime   time.Time // zero while Begun
	// CheckpointID is the checkpoint the first attempt's task ran from; ""
	// when the begin named none.
	CheckpointID string
	// Resolution is how the latest attempt in doubt was settled; nil when
	// none was.
	Resolution *EffectResolution
	// DuplicateOf is, for a call the duplicate-intent guard caught, the
	// earlier call it repeats; it never ran (Attempts is 0).
	DuplicateOf string
	// RunID is the run that began the latest attempt; "" when unnamed.
	RunID string
	// Approval is the call's approval record, for a call that requires
	// approval; nil otherwise.
	Approval *EffectApproval
	// EarlierResolutions and EarlierApprovals are the resolutions and the
	// approval decisions that Resolution and Approval replaced, oldest
	// first, bounded by MaxDecisions.
	EarlierResolutions []EffectResolution
	EarlierApprovals   []EffectApproval
}

// ThreadEffectBegin is a BeginThreadEffect call.
type ThreadEffectBegin struct {
	ThreadID  string
	NS        string
	ToolUseID string
	Name      string
	// InputJSON is valid JSON text; "" means {}.
	InputJSON string
	Class     EffectClass
	// CheckpointID, when set, subjects the begin to the late-write rule.
	CheckpointID string
	// RequestID is a canonical UUID, or "" for no retry detection.
	RequestID string
	// Repeatable exempts the call from the duplicate-intent guard.
	Repeatable bool
	// RunID names the run making the call; "" leaves the call out of the
	// guard.
	RunID string
	// RequiresApproval gates the first attempt on an approval for the
	// call's input, which it spends.
	RequiresApproval bool
}

// ThreadEffectRecord is a RecordThreadEffect call.
type ThreadEffectRecord struct {
	ThreadID  string
	NS        string
	ToolUseID string
	Attempt   uint32
	// Output is held in memory (Data).
	Output    GraphValue
	IsError   bool
	RequestID string
}

// ThreadEffectBeginResult is what a begin answers.
type ThreadEffectBeginResult struct {
	Decision Decision
	// Effect is the entry after the call; for DecisionRun, Effect.Attempts
	// is the attempt to record. Zero when DroppedLate.
	Effect ThreadEffect
	// DroppedLate: the late-write rule dropped the begin; nothing stored.
	DroppedLate bool
	// Duplicate is, when the duplicate-intent guard caught the call, the
	// earlier call it repeats; ToolResultText is then the text to answer
	// the model with (for DecisionReuse, followed by Duplicate's output).
	Duplicate      *ThreadEffect
	ToolResultText string
}

// ThreadEffectRecordResult is what a record answers.
type ThreadEffectRecordResult struct {
	Effect ThreadEffect
	// AlreadyRecorded: this outcome had been recorded before.
	AlreadyRecorded bool
	// DroppedLate: the thread was deleted since the call began; nothing
	// stored.
	DroppedLate bool
}

// ThreadEffectKey orders a thread's ledger: by namespace, then tool use id.
type ThreadEffectKey struct {
	NS        string
	ToolUseID string
}

// Less reports whether k sorts before o.
func (k ThreadEffectKey) Less(o ThreadEffectKey) bool {
	if k.NS != o.NS {
		return k.NS < o.NS
	}
	return k.ToolUseID < o.ToolUseID
}

// FieldMismatchError is ErrEffectInputMismatch naming the begin's field that
// differs from the entry ("name" or "input_json").
type FieldMismatchError struct {
	Field string
	Msg   string
}

func (e *FieldMismatchError) Error() string {
	return fmt.Sprintf("%v: %s", ErrEffectInputMismatch, e.Msg)
}
func (e *FieldMismatchError) Unwrap() error { return ErrEffectInputMismatch }

// CanonicalJSON returns s with object keys sorted and no insignificant
// space; numbers keep their text. "" is {}.
func CanonicalJSON(s string) (string, error) {
	if s == "" {
		return "{}", nil
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	if d.More() {
		return "", fmt.Errorf("text after the JSON value")
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// ThreadEffectDigest returns the SHA-256 of name and the canonical form of
// inputJSON, which must be valid JSON ("" is {}).
func ThreadEffectDigest(name, inputJSON string) ([]byte, error) {
	c, err := CanonicalJSON(inputJSON)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	writeStrings(h, "thread-effect", name, c)
	return h.Sum(nil), nil
}

// Fingerprint returns a digest of the begin's payload for retry detection.
func (b *ThreadEffectBegin) Fingerprint() []byte {
	h := sha256.New()
	writeStrings(h, "begin-effect", b.ThreadID, b.NS, b.ToolUseID, b.Name, b.InputJSON, b.Class.String(), b.CheckpointID)
	if b.RequiresApproval {
		writeStrings(h, "requires-approval")
	}
	if b.Repeatable || b.RunID != "" {
		writeStrings(h, "guard", fmt.Sprint(b.Repeatable), b.RunID)
	}
	return h.Sum(nil)
}

// Fingerprint returns a digest of the record's payload for retry detection.
func (r *ThreadEffectRecord) Fingerprint() []byte {
	h := sha256.New()
	writeStrings(h, "record-effect", r.ThreadID, r.NS, r.ToolUseID, fmt.Sprint(r.Attempt, r.IsError), r.Output.Type)
	writeValue(h, r.Output)
	return h.Sum(nil)
}

// ApplyThreadEffectBegin applies b to the stored entry cur (nil when the
// call has none) at now. It returns the entry to store, nil when nothing
// changes, and the answer: DecisionRun with a new attempt when the call has
// no entry, when its latest attempt failed, or when it began without an
// outcome and its class allows a re-run; DecisionReuse when a result is
// recorded; DecisionInDoubt when a side-effecting call began without an
// outcome. A begin whose name or input differs from the entry's is a
// *FieldMismatchError.
func ApplyThreadEffectBegin(cur *ThreadEffect, b *ThreadEffectBegin, now time.Time) (*ThreadEffect, ThreadEffectBeginResult, error) {
	digest, err := ThreadEffectDigest(b.Name, b.InputJSON)
	if err != nil {
		return nil, ThreadEffectBeginResult{}, fmt.Errorf("%w: input_json: %v", ErrInvalidArgument, err)
	}
	if cur == nil {
		input := b.InputJSON
		if input == "" {
			input = "{}"
		}
		if b.RequiresApproval {
			// Entered as waiting: no attempt begins without an approval.
			e := &ThreadEffect{
				ThreadID: b.ThreadID, NS: b.NS, ToolUseID: b.ToolUseID, Name: b.Name, InputJSON: input,
				InputDigest: digest, Class: b.Class, State: ThreadEffectNotBegun, CheckpointID: b.CheckpointID,
				Approval: &EffectApproval{Status: ApprovalWaiting, InputDigest: digest, RequestTime: now},
			}
			return e, ThreadEffectBeginResult{Decision: DecisionAwaitApproval, Effect: *e}, nil
		}
		key, err := newIdempotencyKey()
		if err != nil {
			return nil, ThreadEffectBeginResult{}, err
		}
		e := &ThreadEffect{
			ThreadID: b.ThreadID, NS: b.NS, ToolUseID: b.ToolUseID, Name: b.Name, InputJSON: input,
			InputDigest: digest, Class: b.Class, IdempotencyKey: key,
			Attempts: 1, State: ThreadEffectBegun, BeginTime: now, CheckpointID: b.CheckpointID, RunID: b.RunID,
		}
		return e, ThreadEffectBeginResult{Decision: DecisionRun, Effect: *e}, nil
	}
	if !bytes.Equal(cur.InputDigest, digest) {
		field, what := "input_json", "input"
		if cur.Name != b.Name {
			field, what = "name", "tool name"
		}
		return nil, ThreadEffectBeginResult{}, &FieldMismatchError{Field: field,
			Msg: fmt.Sprintf("tool use %q of thread %q (namespace %q) was begun as a call of %q with another %s; the model reused a tool use id: give the new call its own id",
				b.ToolUseID, b.ThreadID, b.NS, cur.Name, what)}
	}
	if cur.State == ThreadEffectNotBegun {
		dec, next := gateApproval(cur.Approval, digest, now)
		e := *cur
		if next != nil {
			setApproval(&e.Approval, &e.EarlierApprovals, next)
		}
		if dec != DecisionRun {
			if next == nil {
				return nil, ThreadEffectBeginResult{Decision: dec, Effect: e}, nil
			}
			return &e, ThreadEffectBeginResult{Decision: dec, Effect: e}, nil
		}
		// The approval is spent by the first attempt, in this write.
		if e.IdempotencyKey, err = newIdempotencyKey(); err != nil {
			return nil, ThreadEffectBeginResult{}, err
		}
		e.Attempts, e.State, e.BeginTime = 1, ThreadEffectBegun, now
		return &e, ThreadEffectBeginResult{Decision: DecisionRun, Effect: e}, nil
	}
	switch {
	case cur.State == ThreadEffectSucceeded:
		return nil, ThreadEffectBeginResult{Decision: DecisionReuse, Effect: *cur}, nil
	case cur.State == ThreadEffectBegun && cur.Class == SideEffect && !cur.resolvedNotDone():
		return nil, ThreadEffectBeginResult{Decision: DecisionInDoubt, Effect: *cur}, nil
	}
	// A failed attempt, a re-runnable one that began without an outcome, or
	// one resolved NOT_DONE: a new attempt under the same idempotency key.
	e := *cur
	if cur.resolvedNotDone() {
		r := *cur.Resolution
		r.RetryBegun = true
		e.Resolution = &r
	}
	e.Attempts++
	e.RunID = b.RunID
	e.State = ThreadEffectBegun
	e.Output, e.OutputDigest, e.RecordTime = GraphValue{}, nil, time.Time{}
	e.BeginTime = now
	return &e, ThreadEffectBeginResult{Decision: DecisionRun, Effect: e}, nil
}

// ApplyThreadEffectRecord applies r to the stored entry cur (nil when the
// call has none) at now. It returns the entry to store, nil when nothing
// changes, and the answer. Recording the latest attempt's outcome again
// changes nothing; another outcome for it is ErrEffectConflict; a record of
// a call never begun, or of an attempt other than the latest, is
// ErrEffectNotBegun.
func ApplyThreadEffectRecord(cur *ThreadEffect, r *ThreadEffectRecord, now time.Time) (*ThreadEffect, ThreadEffectRecordResult, error) {
	if cur == nil {
		return nil, ThreadEffectRecordResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) was never begun; call BeginThreadEffect before running the tool",
			ErrEffectNotBegun, r.ToolUseID, r.ThreadID, r.NS)
	}
	if r.Attempt != cur.Attempts {
		return nil, ThreadEffectRecordResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) is at attempt %d, not %d; record the attempt BeginThreadEffect returned",
			ErrEffectNotBegun, r.ToolUseID, r.ThreadID, r.NS, cur.Attempts, r.Attempt)
	}
	sum := sha256.Sum256(r.Output.Data)
	state := ThreadEffectSucceeded
	if r.IsError {
		state = ThreadEffectFailed
	}
	if cur.State != ThreadEffectBegun {
		if cur.State == state && cur.Output.Type == r.Output.Type && bytes.Equal(cur.OutputDigest, sum[:]) {
			return nil, ThreadEffectRecordResult{Effect: *cur, AlreadyRecorded: true}, nil
		}
		return nil, ThreadEffectRecordResult{}, fmt.Errorf("%w: attempt %d of tool use %q of thread %q (namespace %q) has another outcome recorded; the first record stands",
			ErrEffectConflict, r.Attempt, r.ToolUseID, r.ThreadID, r.NS)
	}
	e := *cur
	e.State = state
	e.Output = GraphValue{Type: r.Output.Type, Size: int64(len(r.Output.Data)), Data: r.Output.Data}
	e.OutputDigest = sum[:]
	e.RecordTime = now
	return &e, ThreadEffectRecordResult{Effect: e}, nil
}

// ReplayThreadEffectBegin answers a begin whose request id started attempt
// of the entry cur before: DecisionRun for that attempt, with the entry as
// it is now.
func ReplayThreadEffectBegin(cur *ThreadEffect, attempt uint32) ThreadEffectBeginResult {
	res := ThreadEffectBeginResult{Decision: DecisionRun}
	if cur != nil {
		res.Effect = *cur
		res.Effect.Attempts = attempt
	}
	return res
}

// OutputBudget bounds the bytes of outputs a listing of ledger entries
// holds: Trim, called on the entries in order, keeps an output's bytes
// while those kept add up to at most Bytes, and drops the bytes of one
// that would pass it (its Size is kept). The zero OutputBudget keeps every
// output whole.
type OutputBudget struct {
	// Bytes is the budget; 0 means no limit.
	Bytes int
	used  int
}

// Trim drops e's output's bytes when they do not fit in what is left of b.
func (b *OutputBudget) Trim(e *ThreadEffect) {
	n := len(e.Output.Data)
	if b.Bytes <= 0 || n == 0 {
		return
	}
	if b.used+n > b.Bytes {
		e.Output.Size = int64(n)
		e.Output.Data = nil
		return
	}
	b.used += n
}

// resolvedNotDone reports whether e's latest attempt was resolved NOT_DONE
// and no new attempt was begun since.
func (e *ThreadEffect) resolvedNotDone() bool {
	return e.Resolution != nil && e.Resolution.Outcome == ResolvedNotDone && !e.Resolution.RetryBegun
}

// ThreadEffectResolve is a ResolveThreadEffect call.
type ThreadEffectResolve struct {
	ThreadID  string
	NS        string
	ToolUseID string
	Outcome   ResolutionOutcome
	// Output, for ResolvedDone, is held in memory (Data).
	Output       GraphValue
	IsError      bool
	Note         string
	ResolverKind ResolverKind
	ResolvedBy   string
	RequestID    string
}

// Fingerprint returns a digest of the resolution's payload for retry
// detection.
func (r *ThreadEffectResolve) Fingerprint() []byte {
	h := sha256.New()
	writeStrings(h, "resolve-effect", r.ThreadID, r.NS, r.ToolUseID, fmt.Sprint(int(r.Outcome), r.IsError, int(r.ResolverKind)),
		r.Note, r.ResolvedBy, r.Output.Type)
	writeValue(h, r.Output)
	return h.Sum(nil)
}

// ThreadEffectResolveResult is what a resolution answers.
type ThreadEffectResolveResult struct {
	Effect          ThreadEffect
	AlreadyResolved bool
}

// ApplyThreadEffectResolve applies r to the stored entry cur at now, as
// Resolve does for a session's call: it returns the entry to store (nil
// when nothing changes) and the answer. The latest attempt must be in
// doubt (begun without an outcome, side-effecting), else ErrCallNotInDoubt;
// a call never begun is ErrCallUnknown. The same finding again answers
// AlreadyResolved with the first record; another is ErrResolutionConflict.
// DONE records Output as the attempt's outcome (failed when IsError);
// NOT_DONE leaves the attempt begun, and the next begin starts a new one.
func ApplyThreadEffectResolve(cur *ThreadEffect, r *ThreadEffectResolve, now time.Time) (*ThreadEffect, ThreadEffectResolveResult, error) {
	if cur == nil {
		return nil, ThreadEffectResolveResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) was never begun",
			ErrCallUnknown, r.ToolUseID, r.ThreadID, r.NS)
	}
	if cur.DuplicateOf != "" {
		return nil, ThreadEffectResolveResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) never ran: it repeats tool use %q, which the duplicate-intent guard names; resolve that one",
			ErrCallNotInDoubt, r.ToolUseID, r.ThreadID, r.NS, cur.DuplicateOf)
	}
	sum := sha256.Sum256(r.Output.Data)
	state := ThreadEffectSucceeded
	if r.IsError {
		state = ThreadEffectFailed
	}
	if res := cur.Resolution; res != nil && !res.RetryBegun {
		same := res.Outcome == r.Outcome
		if r.Outcome == ResolvedDone {
			same = same && cur.State == state && cur.Output.Type == r.Output.Type && bytes.Equal(cur.OutputDigest, sum[:])
		}
		if !same {
			return nil, ThreadEffectResolveResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) was resolved %s already by %s %q at %s, with another finding; the first resolution stands",
				ErrResolutionConflict, r.ToolUseID, r.ThreadID, r.NS, res.Outcome, res.ResolverKind, res.ResolvedBy, res.ResolveTime.UTC().Format(time.RFC3339))
		}
		return nil, ThreadEffectResolveResult{Effect: *cur, AlreadyResolved: true}, nil
	}
	if cur.State != ThreadEffectBegun || cur.Class != SideEffect {
		why := "its latest attempt's outcome is recorded"
		if cur.State == ThreadEffectNotBegun {
			why = "no attempt of it has begun: it waits for approval or was denied"
		}
		if cur.State == ThreadEffectBegun {
			why = fmt.Sprintf("it is %s: the next begin runs it again", cur.Class)
		}
		return nil, ThreadEffectResolveResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) is not in doubt (%s)",
			ErrCallNotInDoubt, r.ToolUseID, r.ThreadID, r.NS, why)
	}
	e := *cur
	setResolution(&e.Resolution, &e.EarlierResolutions,
		&EffectResolution{Outcome: r.Outcome, ResolverKind: r.ResolverKind, ResolvedBy: r.ResolvedBy, Note: r.Note, ResolveTime: now})
	if r.Outcome == ResolvedDone {
		e.State = state
		e.Output = GraphValue{Type: r.Output.Type, Size: int64(len(r.Output.Data)), Data: r.Output.Data}
		e.OutputDigest = sum[:]
		e.RecordTime = now
	}
	return &e, ThreadEffectResolveResult{Effect: e}, nil
}

// ThreadEffectApprove is an ApproveThreadEffect call.
type ThreadEffectApprove struct {
	ThreadID  string
	NS        string
	ToolUseID string
	Decision  ApprovalStatus // ApprovalApproved or ApprovalDenied
	// InputDigest, when set, must be the call's.
	InputDigest []byte
	DecidedBy   string
	Note        string
	RequestID   string
}

// Fingerprint returns a digest of the decision's payload for retry
// detection.
func (r *ThreadEffectApprove) Fingerprint() []byte {
	h := sha256.New()
	writeStrings(h, "approve-effect", r.ThreadID, r.NS, r.ToolUseID, fmt.Sprint(int(r.Decision)), string(r.InputDigest), r.DecidedBy, r.Note)
	return h.Sum(nil)
}

// ThreadEffectApproveResult is what a decision answers.
type ThreadEffectApproveResult struct {
	Effect         ThreadEffect
	AlreadyDecided bool
}

// ApplyThreadEffectApprove applies r to the stored entry cur at now, as
// Approve does for a session's call: it returns the entry to store (nil
// when nothing changes) and the answer. The call must wait for approval
// (state NotBegun), else ErrApprovalNotWaiting, or ErrCallUnknown when it
// has no entry; a digest given must be the call's
// (ErrApprovalInputMismatch); the same decision again answers
// AlreadyDecided, another is ErrApprovalConflict.
func ApplyThreadEffectApprove(cur *ThreadEffect, r *ThreadEffectApprove, now time.Time) (*ThreadEffect, ThreadEffectApproveResult, error) {
	if cur == nil {
		return nil, ThreadEffectApproveResult{}, fmt.Errorf("%w: tool use %q of thread %q (namespace %q) was never begun: nothing waits for approval",
			ErrCallUnknown, r.ToolUseID, r.ThreadID, r.NS)
	}
	what := fmt.Sprintf("tool use %q of thread %q (namespace %q)", r.ToolUseID, r.ThreadID, r.NS)
	if cur.State != ThreadEffectNotBegun && cur.Approval == nil {
		return nil, ThreadEffectApproveResult{}, fmt.Errorf("%w: %s was begun without approval", ErrApprovalNotWaiting, what)
	}
	next, already, refusal, msg := decideApproval(cur.Approval, cur.InputDigest, r.Decision, r.InputDigest, r.DecidedBy, r.Note, now, what)
	if refusal != nil {
		return nil, ThreadEffectApproveResult{}, fmt.Errorf("%w: %s", refusal, msg)
	}
	if already {
		return nil, ThreadEffectApproveResult{Effect: *cur, AlreadyDecided: true}, nil
	}
	if cur.State != ThreadEffectNotBegun {
		return nil, ThreadEffectApproveResult{}, fmt.Errorf("%w: %s was begun already with its approval", ErrApprovalNotWaiting, what)
	}
	e := *cur
	setApproval(&e.Approval, &e.EarlierApprovals, next)
	return &e, ThreadEffectApproveResult{Effect: e}, nil
}
