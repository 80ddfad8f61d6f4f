package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Message is one entry of a session's history: the provider's role and its
// content as JSON text (for Anthropic, the content array or a string).
type Message struct {
	Role        string
	ContentJSON string
}

// EffectClass says what running a tool does to the world outside.
type EffectClass = savepointv1.EffectClass

// The effect classes. The zero value (unspecified) counts as SideEffect.
const (
	// ReadOnly tools only read: re-running one after a crash is always safe,
	// so the Session does not call BeginEffect for them.
	ReadOnly = savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY
	// Idempotent tools change the world, but running one twice with the same
	// idempotency key has the effect of running it once.
	Idempotent = savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT
	// SideEffect tools change the world and must not run twice.
	SideEffect = savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
)

// SessionStatus is where a session is in its life: StatusActive until
// Complete makes it StatusCompleted or StatusFailed.
type SessionStatus = savepointv1.SessionStatus

// The session statuses.
const (
	StatusActive    = savepointv1.SessionStatus_SESSION_STATUS_ACTIVE
	StatusCompleted = savepointv1.SessionStatus_SESSION_STATUS_COMPLETED
	StatusFailed    = savepointv1.SessionStatus_SESSION_STATUS_FAILED
)

// ToolUse is a tool call the model named. It is pending from PointA until
// PointB answers it.
type ToolUse struct {
	// ToolUseID is the provider's tool_use_id.
	ToolUseID string
	Name      string
	// InputJSON is the tool's input as JSON text; empty means {}.
	InputJSON string
	// EffectClass is what running the tool does; unspecified means
	// SideEffect.
	EffectClass EffectClass
	// Repeatable exempts the call from the daemon's duplicate-intent guard
	// (docs/api.md "The same action under a new id"): set it for a tool that
	// may legitimately repeat a call with the same input after a restart.
	Repeatable bool
}

// Errors the Session reports without asking the daemon.
var (
	// ErrToolUsesPending: the session has pending tool uses that PointB has
	// not answered, so it cannot name new ones or change its history.
	ErrToolUsesPending = errors.New("savepoint: tool uses still pending; answer them with PointB first")
	// ErrResultsMismatch: the results given to PointB do not answer every
	// pending tool use exactly once.
	ErrResultsMismatch = errors.New("savepoint: tool results do not answer the pending tool uses exactly once")
	// ErrAlreadyRun: the session ran this tool use already; it never runs one
	// twice.
	ErrAlreadyRun = errors.New("savepoint: tool use already run by this session")
	// ErrNotRun: a result given to PointB to record claims an outcome that
	// no tool of this session returned.
	ErrNotRun = errors.New("savepoint: result not produced by running the tool")
)

// Session is one agent task as the daemon keeps it. It carries the session
// id, revision, epoch, history and pending tool uses, so its methods need
// none of them: every save builds on the revision the last one made, under
// the epoch the session owns. Methods are safe for concurrent use, and
// RunTool may run several tools of one turn at once, but the turn's PointA,
// RunTool calls and PointB must happen in that order.
type Session struct {
	c  *Client
	id string

	mu       sync.Mutex
	revision uint64
	epoch    uint64
	meta     meta
	messages []Message
	count    uint64
	pending  []*savepointv1.ToolUse
	failed   *savepointv1.SaveCheckpointRequest // last save whose outcome is unknown
	status   SessionStatus
	output   string                // the final output, once completed or failed
	started  map[string]bool       // pending tool uses this process began or ran
	ran      map[string]ToolResult // their results, once run
}

// meta is what each save sends whole and the session keeps between saves.
type meta struct {
	task       string
	turn       uint32
	tokensUsed uint64
	stateJSON  string
	labels     map[string]string
}

func (c *Client) newSession(id string) *Session {
	return &Session{c: c, id: id, status: StatusActive, started: map[string]bool{}, ran: map[string]ToolResult{}}
}

// StartOptions are the optional parts of a new session.
type StartOptions struct {
	// Replace deletes an existing session with the same id (history and
	// ledger), a completed one too, before creating the new one. Without
	// it, an existing session makes Start fail with ErrSessionExists.
	Replace bool
	// Messages is the initial history, such as the user's prompt.
	Messages []Message
	// StateJSON is opaque client state, kept until a save changes it.
	StateJSON string
	// Labels for ListSessions filtering, kept until a save changes them.
	Labels map[string]string
}

// Start creates a fresh session (revision 1, turn 0) and owns it. opts may be
// nil.
func (c *Client) Start(ctx context.Context, id, task string, opts *StartOptions) (*Session, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	s := c.newSession(id)
	m := meta{task: task, stateJSON: opts.StateJSON, labels: maps.Clone(opts.Labels)}
	err := s.save(ctx, m, nil, opts.Messages, nil)
	if errors.Is(err, ErrSessionFenced) || errors.Is(err, ErrSessionCompleted) {
		// A create carries epoch 0, which the daemon fences once the
		// existing session has been resumed, and refuses on a completed
		// session: either way the session exists.
		err = fmt.Errorf("%w: %w", ErrSessionExists, err)
	}
	if errors.Is(err, ErrSessionExists) && opts.Replace {
		if err := c.deleteSession(ctx, id); err != nil {
			return nil, fmt.Errorf("savepoint: replacing session %q: %w", id, err)
		}
		err = s.save(ctx, m, nil, opts.Messages, nil)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// deleteSession takes ownership of a session and deletes it, so that its old
// owner is fenced. A session that cannot be decoded is deleted under the
// epoch its error reports.
func (c *Client) deleteSession(ctx context.Context, id string) error {
	var epoch uint64
	r, err := c.raw.Resume(ctx, &savepointv1.ResumeRequest{SessionId: id})
	switch e, _ := errors.AsType[*Error](err); {
	case err == nil:
		epoch = r.GetEpoch()
	case errors.Is(err, ErrSessionNotFound):
		return nil
	case errors.Is(err, ErrCheckpointCorrupt) && e != nil:
		epoch = e.CurrentEpoch
	default:
		return err
	}
	_, err = c.raw.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: id, Epoch: epoch})
	if errors.Is(err, ErrSessionNotFound) {
		return nil
	}
	return err
}

// Resume takes ownership of an existing session (fencing any process that
// owned it before) and loads its latest revision with its whole history,
// paging through ListMessages. A session that does not exist is
// ErrSessionNotFound: nothing to resume from. If the revision has pending tool uses,
// call Reconcile and then PointB with its results.
//
// A completed or failed session is loaded without taking it over: Status
// says so, FinalOutput holds its output, and saves are refused with
// ErrSessionCompleted. Reopen continues it.
func (c *Client) Resume(ctx context.Context, id string) (*Session, error) {
	return c.resume(ctx, id, false)
}

// Reopen is Resume that makes a completed or failed session active again
// before taking it over; on an active session it is Resume.
func (c *Client) Reopen(ctx context.Context, id string) (*Session, error) {
	return c.resume(ctx, id, true)
}

func (c *Client) resume(ctx context.Context, id string, reopen bool) (*Session, error) {
	r, err := c.raw.Resume(ctx, &savepointv1.ResumeRequest{SessionId: id, Reopen: reopen})
	if err != nil {
		return nil, err
	}
	cp := r.GetCheckpoint()
	if err := c.loadHistory(ctx, cp, r.GetNextPageToken()); err != nil {
		return nil, err
	}
	msgs := appendMessages(make([]Message, 0, len(cp.GetMessages())), cp.GetMessages())
	s := c.newSession(id)
	s.revision = cp.GetRevision()
	s.epoch = r.GetEpoch()
	s.meta = meta{
		task: cp.GetTask(), turn: cp.GetTurn(), tokensUsed: cp.GetTokensUsed(),
		stateJSON: cp.GetStateJson(), labels: maps.Clone(cp.GetLabels()),
	}
	s.messages = msgs
	s.count = cp.GetMessageCount()
	s.status, s.output = cp.GetStatus(), cp.GetFinalOutput()
	for _, p := range cp.GetPendingToolUses() {
		s.pending = append(s.pending, proto.CloneOf(p))
	}
	return s, nil
}

func appendMessages(dst []Message, src []*savepointv1.Message) []Message {
	for _, m := range src {
		dst = append(dst, Message{Role: m.GetRole(), ContentJSON: m.GetContentJson()})
	}
	return dst
}

// PointA saves the assistant message that names calls and makes calls the
// pending tool uses, before any of them runs; it counts a new turn. Run each
// call with RunTool, then answer them all with PointB. With no calls (the
// model's final answer) it only appends the message.
func (s *Session) PointA(ctx context.Context, assistant Message, calls []ToolUse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		return ErrToolUsesPending
	}
	pending := make([]*savepointv1.ToolUse, 0, len(calls))
	for _, c := range calls {
		class := effectiveClass(c.EffectClass)
		pending = append(pending, &savepointv1.ToolUse{
			ToolUseId: c.ToolUseID, Name: c.Name, InputJson: c.InputJSON, EffectClass: class,
			// RunTool and Reconcile call BeginEffect before running any tool
			// that is not read-only, so a call never begun is safe to run.
			BeginTracked: class != ReadOnly,
			Repeatable:   c.Repeatable,
		})
	}
	m := s.meta
	m.turn++
	return s.save(ctx, m, nil, []Message{assistant}, pending)
}

func effectiveClass(c EffectClass) EffectClass {
	if c == savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
		return SideEffect
	}
	return c
}

// PointB appends the message(s) answering the pending tool uses, made from
// results by the client's ToolResultsFunc, and clears the pending set. The
// results must answer every pending tool use exactly once (in any order;
// they are appended in the order the tool uses were named) and come from
// RunTool or Reconcile: a result whose tool did not run (Err set) is refused.
// With nothing pending and no results, PointB does nothing.
func (s *Session) PointB(ctx context.Context, results []ToolResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 && len(results) == 0 {
		return nil
	}
	byID := make(map[string]ToolResult, len(results))
	for _, r := range results {
		if r.Err != nil {
			return fmt.Errorf("savepoint: PointB: %w", r.Err)
		}
		if _, dup := byID[r.ToolUseID]; dup {
			return fmt.Errorf("%w: tool use %q answered twice", ErrResultsMismatch, r.ToolUseID)
		}
		byID[r.ToolUseID] = r
	}
	ordered := make([]ToolResult, 0, len(results))
	for _, p := range s.pending {
		r, ok := byID[p.GetToolUseId()]
		if !ok {
			return fmt.Errorf("%w: no result for tool use %q (%s)", ErrResultsMismatch, p.GetToolUseId(), p.GetName())
		}
		ordered = append(ordered, r)
	}
	if len(ordered) != len(results) {
		return fmt.Errorf("%w: %d results for %d pending tool uses", ErrResultsMismatch, len(results), len(s.pending))
	}
	// A tool whose outcome missed the ledger: try once more, so that a crash
	// before this save does not leave it in doubt. Only an outcome this
	// session's RunTool or Reconcile got from the tool is recorded, so a
	// result made by hand can never reach the ledger ("execute first, record
	// after").
	for i, r := range ordered {
		if r.LedgerErr != nil {
			p := s.pending[i]
			if ran, ok := s.ran[r.ToolUseID]; !ok || ran.Content != r.Content || ran.IsError != r.IsError {
				return fmt.Errorf("savepoint: PointB: tool use %q (%s) has a ledger error but its result is not the one this session's tool returned: %w",
					r.ToolUseID, p.GetName(), ErrNotRun)
			}
			if err := s.record(ctx, p, r); err != nil {
				s.c.reportLedgerError(s.id, p, r, err)
			} else {
				ordered[i].LedgerErr = nil
			}
		}
	}
	msgs, err := s.c.cfg.resultsFunc(ordered)
	if err != nil {
		return fmt.Errorf("savepoint: PointB: making the tool result messages: %w", err)
	}
	return s.save(ctx, s.meta, nil, msgs, nil)
}

// SaveOptions is a generic save: nil fields keep their value.
type SaveOptions struct {
	Task       *string
	Turn       *uint32
	TokensUsed *uint64
	// StateJSON is opaque client state as JSON text; "" removes it.
	StateJSON *string
	// Labels replaces the labels when not nil (an empty map removes them).
	Labels map[string]string
	// KeepMessages rewinds or compacts: only the first KeepMessages messages
	// are kept before Append. Older revisions stay readable as they were.
	KeepMessages *uint64
	// Append adds messages to the history.
	Append []Message
}

// Save makes a new revision with the changes in o. Pending tool uses stay
// pending; while any are, Save refuses to append or rewind
// (ErrToolUsesPending), since the history must answer them first.
func (s *Session) Save(ctx context.Context, o SaveOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 && (len(o.Append) > 0 || o.KeepMessages != nil) {
		return ErrToolUsesPending
	}
	m := s.meta
	if o.Task != nil {
		m.task = *o.Task
	}
	if o.Turn != nil {
		m.turn = *o.Turn
	}
	if o.TokensUsed != nil {
		m.tokensUsed = *o.TokensUsed
	}
	if o.StateJSON != nil {
		m.stateJSON = *o.StateJSON
	}
	if o.Labels != nil {
		m.labels = maps.Clone(o.Labels)
	}
	return s.save(ctx, m, o.KeepMessages, o.Append, s.pending)
}

// save is the one place a Session writes a revision. It sends the whole
// meta, builds on the session's revision under its epoch, and on success
// makes the new revision the session's. The request_id of a save whose
// outcome is unknown is reused when the same save is tried again, so the
// daemon applies it once; within one call the client's retries resend it
// unchanged. A save refused before it was sent (INVALID_UTF8) changes
// nothing.
func (s *Session) save(ctx context.Context, m meta, keep *uint64, app []Message, pending []*savepointv1.ToolUse) error {
	req := &savepointv1.SaveCheckpointRequest{
		SessionId:        s.id,
		ExpectedRevision: s.revision,
		Epoch:            s.epoch,
		Task:             m.task,
		Turn:             m.turn,
		TokensUsed:       m.tokensUsed,
		KeepMessages:     keep,
		PendingToolUses:  pending,
		StateJson:        m.stateJSON,
		Labels:           m.labels,
	}
	for _, msg := range app {
		req.AppendMessages = append(req.AppendMessages, &savepointv1.Message{Role: msg.Role, ContentJson: msg.ContentJSON})
	}
	req.RequestId = s.requestID(req)
	resp, err := s.c.raw.SaveCheckpoint(ctx, req)
	if err != nil {
		// A save the client refused to send tells nothing of an earlier
		// save whose outcome is unknown: that one keeps its request_id.
		if !unsent(err) {
			s.failed = nil
			if outcomeUnknown(err) {
				s.failed = req
			}
		}
		return err
	}
	s.failed = nil
	s.revision = resp.GetRevision()
	s.epoch = resp.GetEpoch()
	s.meta = m
	if keep != nil && *keep < uint64(len(s.messages)) {
		s.messages = s.messages[:*keep:*keep]
	}
	s.messages = append(s.messages, app...)
	s.count = resp.GetMessageCount()
	if s.count != uint64(len(s.messages)) {
		s.c.cfg.logger.Error("savepoint: the daemon's message count differs from the history this session holds",
			"session", s.id, "revision", s.revision, "daemon", s.count, "client", len(s.messages))
	}
	if !slices.Equal(s.pending, pending) {
		s.pending = pending
		clear(s.started)
		clear(s.ran)
	}
	return nil
}

func (s *Session) requestID(req *savepointv1.SaveCheckpointRequest) string {
	if s.failed != nil {
		prev := proto.CloneOf(s.failed)
		prev.RequestId = ""
		if proto.Equal(prev, req) {
			return s.failed.GetRequestId()
		}
	}
	return uuid.NewString()
}

// outcomeUnknown says whether a failed call may have been applied: the
// daemon did not answer with a definite refusal.
func outcomeUnknown(err error) bool {
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Reason == "" {
		return true
	}
	r, _ := reason.Parse(e.Reason)
	return r == savepointv1.ErrorReason_ERROR_REASON_UNAVAILABLE || r == savepointv1.ErrorReason_ERROR_REASON_INTERNAL ||
		r == savepointv1.ErrorReason_ERROR_REASON_COMMIT_OUTCOME_UNKNOWN
}

// Delete deletes the session (checkpoints, history and ledger) under the
// epoch it owns. The Session must not be used afterwards.
func (s *Session) Delete(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.c.raw.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: s.id, Epoch: s.epoch})
	return err
}

// Complete marks the session StatusCompleted or StatusFailed with its final
// output, under the epoch it owns, without making a revision; the daemon
// then refuses its saves and BeginEffect (ErrSessionCompleted), and a later
// Resume returns it without taking it over. Completing it again with the
// same status and output succeeds; another is ErrSessionCompleted. The call
// carries a request_id, so a retry after UNAVAILABLE applies it once.
func (s *Session) Complete(ctx context.Context, status SessionStatus, finalOutput string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp, err := s.c.raw.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{
		SessionId: s.id, Epoch: s.epoch, Status: status, FinalOutput: finalOutput, RequestId: uuid.NewString(),
	})
	if err != nil {
		return err
	}
	s.status, s.output = resp.GetStatus(), finalOutput
	return nil
}

// Status returns the session's status as last loaded or set by Complete.
func (s *Session) Status() SessionStatus { s.mu.Lock(); defer s.mu.Unlock(); return s.status }

// FinalOutput returns the output Complete stored; empty while active.
func (s *Session) FinalOutput() string { s.mu.Lock(); defer s.mu.Unlock(); return s.output }

// AddTokens adds n to the tokens used, sent with the next save.
func (s *Session) AddTokens(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta.tokensUsed += n
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Revision returns the revision the session's last save made or loaded.
func (s *Session) Revision() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.revision }

// Epoch returns the epoch the session owns.
func (s *Session) Epoch() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.epoch }

// MessageCount returns the number of messages in the history, as the daemon
// counted them.
func (s *Session) MessageCount() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.count }

// Task returns the task description.
func (s *Session) Task() string { s.mu.Lock(); defer s.mu.Unlock(); return s.meta.task }

// Turn returns the turn counter: PointA counts one turn.
func (s *Session) Turn() uint32 { s.mu.Lock(); defer s.mu.Unlock(); return s.meta.turn }

// TokensUsed returns the tokens used so far.
func (s *Session) TokensUsed() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.meta.tokensUsed }

// StateJSON returns the opaque client state, "" when none.
func (s *Session) StateJSON() string { s.mu.Lock(); defer s.mu.Unlock(); return s.meta.stateJSON }

// Labels returns a copy of the labels.
func (s *Session) Labels() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.meta.labels)
}

// Messages returns a copy of the whole history as the session knows it,
// ready to send to the model.
func (s *Session) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.messages)
}

// Pending returns the pending tool uses, in the order they were named.
func (s *Session) Pending() []ToolUse {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ToolUse, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, toolUse(p))
	}
	return out
}

func toolUse(p *savepointv1.ToolUse) ToolUse {
	return ToolUse{ToolUseID: p.GetToolUseId(), Name: p.GetName(), InputJSON: p.GetInputJson(), EffectClass: effectiveClass(p.GetEffectClass()),
		Repeatable: p.GetRepeatable()}
}
