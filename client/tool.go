package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Decision is Reconcile's answer for one pending tool use.
type Decision = savepointv1.Decision

// The decisions.
const (
	// DecisionReuse: the outcome is in the ledger; its output is the result.
	DecisionReuse = savepointv1.Decision_DECISION_REUSE
	// DecisionRun: running the tool is safe; it was run and recorded.
	DecisionRun = savepointv1.Decision_DECISION_RUN
	// DecisionInDoubt: the outcome is unknown; the result is the daemon's
	// is_error text telling the model to check before any retry.
	DecisionInDoubt = savepointv1.Decision_DECISION_IN_DOUBT
	// DecisionDenied: a person denied a call that requires approval; the
	// result is their note, is_error, and the tool did not run.
	DecisionDenied = savepointv1.Decision_DECISION_DENIED
)

// ToolResult answers one tool use.
type ToolResult struct {
	ToolUseID string
	// Content is the tool's output, or its error text when IsError is set.
	// A tool that returns content blocks (text, image, document) returns
	// them as their JSON array (ContentBlocks makes it): the ledger stores
	// that text, and AnthropicToolResults sends it as the blocks.
	Content string
	// IsError reports that the tool ran and failed, or, after Reconcile,
	// that its outcome is in doubt.
	IsError bool
	// Decision is set by Reconcile to the decision that made this result,
	// and is unspecified for RunTool's results.
	Decision Decision
	// DuplicateOf is set when the tool did not run because the daemon's
	// duplicate-intent guard found that an earlier, interrupted run made
	// the same call (docs/api.md "The same action under a new id"): the
	// earlier tool use id. Content is then the daemon's text telling the
	// model the action was already taken (with its output) or may have been
	// (IsError).
	DuplicateOf string

	// Err is set when the tool did NOT run: BeginEffect failed (for example
	// ErrSessionFenced: another process resumed the session) or the call was not
	// pending. Content is empty, PointB refuses the result, and the agent
	// should stop.
	Err error
	// LedgerErr is set when the tool ran but its outcome could not be
	// written to the ledger. Content and IsError are still the tool's real
	// outcome: append it, because telling the model it failed would make it
	// retry with a new tool use and repeat the side effect. The failure was
	// logged and passed to the ledger error handler; PointB tries to record
	// it once more. If the agent stops before PointB, Reconcile will report
	// the call as in doubt.
	LedgerErr error
}

// VerifyFunc asks the world whether a tool use in doubt took effect: by the
// idempotency key it was begun with (empty when it was never begun), which
// the tool passed to the API it called, or by its input. It returns what it
// found; an error is taken as VerifyUnknown.
type VerifyFunc func(ctx context.Context, call ToolUse, key string) (Verified, error)

// Verified is what a VerifyFunc found.
type Verified struct {
	Status VerifyStatus
	// Output and IsError are the tool use's outcome, for VerifyDone.
	Output  string
	IsError bool
	// Note is kept with the resolution, such as what was looked up.
	Note string
}

// VerifyStatus says whether a tool use in doubt took effect.
type VerifyStatus int

const (
	// VerifyUnknown: it cannot be told; the tool use stays in doubt.
	VerifyUnknown VerifyStatus = iota
	// VerifyDone: it took effect; Verified.Output is its outcome.
	VerifyDone
	// VerifyNotDone: it did not; it runs again with the same key.
	VerifyNotDone
)

// ToolStage names a moment in the life of a tool use that a hook set with
// WithToolHook observes.
type ToolStage string

// The stages, in the order they happen to one tool use.
const (
	// StageDecided: Reconcile has the daemon's decision for a pending tool
	// use (ToolEvent.Decision and ToolEvent.Begun) and is about to act on it.
	StageDecided ToolStage = "decided"
	// StageBegun: BeginEffect marked the tool use as dispatched; the tool has
	// not run yet. Read-only tools skip this stage.
	StageBegun ToolStage = "begun"
	// StageRan: the tool returned (ToolEvent.Result); its outcome is not in
	// the ledger yet.
	StageRan ToolStage = "ran"
	// StageRecorded: RecordEffect wrote the outcome to the ledger.
	StageRecorded ToolStage = "recorded"
)

// ToolEvent is what a tool hook is told.
type ToolEvent struct {
	Stage     ToolStage
	SessionID string
	Call      ToolUse
	// Decision and Begun are set at StageDecided: the daemon's decision, and
	// whether BeginEffect had marked the tool use before the agent stopped.
	Decision Decision
	Begun    bool
	// Result is set at StageRan and StageRecorded: the tool's outcome.
	Result ToolResult
}

func (s *Session) hook(ev ToolEvent) {
	if f := s.c.cfg.toolHook; f != nil {
		ev.SessionID = s.id
		f(ev)
	}
}

// ToolFunc runs a tool: key is the idempotency key to pass to an external
// API that accepts one ("" for read-only tools). A returned error is the
// tool's failure and becomes an is_error result with its text.
type ToolFunc func(ctx context.Context, call ToolUse, key string) (output string, err error)

// RunTool runs one pending tool use and records its outcome in the ledger:
// execute first, record after. Unless the call is READ_ONLY, BeginEffect
// marks it as dispatched first; if that fails the tool does not run and the
// result carries Err. fn's outcome, success or failure, is recorded and
// returned; see ToolResult for a failed record. RunTool is the only way a
// Session records an effect, and it records only what fn returned, so an
// effect can never be recorded before it happened. Each pending tool use
// runs at most once per session.
func (s *Session) RunTool(ctx context.Context, call ToolUse, fn func(ctx context.Context, key string) (output string, err error)) ToolResult {
	s.mu.Lock()
	p := s.pendingToolUse(call.ToolUseID)
	var err error
	switch {
	case p == nil:
		err = fmt.Errorf("savepoint: tool use %q (%s) not run: %w: name it with PointA first", call.ToolUseID, call.Name, ErrCallNotPending)
	case call.Name != p.GetName():
		err = fmt.Errorf("savepoint: tool use %q not run: %w: named %q at PointA, %q here", call.ToolUseID, ErrToolNameMismatch, p.GetName(), call.Name)
	case s.started[call.ToolUseID]:
		err = fmt.Errorf("savepoint: tool use %q (%s) not run again: %w", call.ToolUseID, call.Name, ErrAlreadyRun)
	default:
		s.started[call.ToolUseID] = true
	}
	epoch := s.epoch
	s.mu.Unlock()
	if err != nil {
		return ToolResult{ToolUseID: call.ToolUseID, Err: err}
	}
	return s.execute(ctx, p, epoch, "", fn)
}

// RunTools runs calls one after the other with RunTool and returns their
// results for PointB. It stops at the first call that could not run.
func (s *Session) RunTools(ctx context.Context, calls []ToolUse, run ToolFunc) ([]ToolResult, error) {
	results := make([]ToolResult, 0, len(calls))
	for _, call := range calls {
		r := s.RunTool(ctx, call, func(ctx context.Context, key string) (string, error) { return run(ctx, call, key) })
		if r.Err != nil {
			return nil, r.Err
		}
		results = append(results, r)
	}
	return results, nil
}

// Reconcile asks the daemon what to do with each pending tool use after a
// resume and returns the results to pass to PointB, in the order the tool
// uses were named: DecisionReuse gives the recorded outcome without running
// anything; DecisionRun runs the tool with run (after BeginEffect unless it
// is READ_ONLY, with the key it was begun with, if any) and records it;
// DecisionInDoubt gives an is_error result with the daemon's text. run may be
// nil only if no tool use needs to run. With nothing pending it returns no
// results.
func (s *Session) Reconcile(ctx context.Context, run ToolFunc) ([]ToolResult, error) {
	return s.ReconcileVerify(ctx, run, nil)
}

// ReconcileVerify is Reconcile with verify asked about each tool use in
// doubt before the model is told its outcome is unknown. Its answer is
// recorded with ResolveEffect (fenced by this session's epoch, resolver
// kind VERIFY): VerifyDone records the output found, which becomes the
// result (DecisionReuse), as on every later resume; VerifyNotDone makes the
// tool run again with the key it was begun with (DecisionRun). VerifyUnknown,
// or an error from verify, leaves it in doubt as Reconcile does. verify nil
// is Reconcile.
func (s *Session) ReconcileVerify(ctx context.Context, run ToolFunc, verify VerifyFunc) ([]ToolResult, error) {
	s.mu.Lock()
	rev, epoch := s.revision, s.epoch
	s.mu.Unlock()
	var resolutions []*savepointv1.Resolution
	for token := ""; ; {
		resp, err := s.c.raw.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.id, PageToken: token})
		if err != nil {
			return nil, err
		}
		if resp.GetRevision() != rev {
			return nil, fmt.Errorf("savepoint: reconcile: %w: the daemon's latest revision is %d, this session's %d",
				ErrRevisionMismatch, resp.GetRevision(), rev)
		}
		resolutions = append(resolutions, resp.GetResolutions()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	results := make([]ToolResult, 0, len(resolutions))
	for _, res := range resolutions {
		tu := res.GetToolUse()
		id := tu.GetToolUseId()
		log := s.c.cfg.logger.With("session", s.id, "tool_use_id", id, "name", tu.GetName(), "decision", res.GetDecision())
		s.hook(ToolEvent{Stage: StageDecided, Call: toolUse(tu), Decision: res.GetDecision(), Begun: res.GetBegun()})
		var r ToolResult
		switch res.GetDecision() {
		case DecisionReuse:
			log.Info("savepoint: reconcile: outcome recorded, reusing it, not running the tool")
			r = ToolResult{ToolUseID: id, Content: res.GetEffect().GetOutput(), IsError: res.GetEffect().GetIsError()}
		case DecisionInDoubt:
			if verify != nil {
				vr, decided, err := s.verifyInDoubt(ctx, res, epoch, run, verify, log)
				if err != nil {
					return nil, err
				}
				if decided != 0 {
					vr.Decision = decided
					results = append(results, vr)
					continue
				}
			}
			log.Warn("savepoint: reconcile: outcome unknown, not running the tool, answering with an is_error result")
			r = ToolResult{ToolUseID: id, Content: res.GetToolResultText(), IsError: true}
		case DecisionRun:
			var err error
			if r, err = s.runReconciled(ctx, res, epoch, run, log); err != nil {
				return nil, err
			}
			if r.Decision == DecisionDenied {
				results = append(results, r)
				continue
			}
		default:
			return nil, fmt.Errorf("savepoint: reconcile: tool use %q: unknown decision %v", id, res.GetDecision())
		}
		r.Decision = res.GetDecision()
		results = append(results, r)
	}
	return results, nil
}

// runReconciled runs the pending tool use res decided DecisionRun, once per
// session, with the key it was begun with.
func (s *Session) runReconciled(ctx context.Context, res *savepointv1.Resolution, epoch uint64, run ToolFunc, log *slog.Logger) (ToolResult, error) {
	tu := res.GetToolUse()
	id := tu.GetToolUseId()
	s.mu.Lock()
	p := s.pendingToolUse(id)
	prev, ran := s.ran[id]
	started := s.started[id]
	if p != nil && !started {
		s.started[id] = true
	}
	s.mu.Unlock()
	switch {
	case ran:
		log.Info("savepoint: reconcile: this session ran the tool already, reusing its result")
		return prev, nil
	case p == nil:
		return ToolResult{}, fmt.Errorf("savepoint: reconcile: tool use %q is not pending in this session: %w", id, ErrCallNotPending)
	case started:
		return ToolResult{}, fmt.Errorf("savepoint: reconcile: tool use %q (%s) not run: %w", id, tu.GetName(), ErrAlreadyRun)
	case run == nil:
		s.unstart(id)
		return ToolResult{}, fmt.Errorf("savepoint: reconcile: tool use %q (%s) must run, but no run function was given", id, tu.GetName())
	}
	log.Info("savepoint: reconcile: safe to run, running the tool")
	call := toolUse(p)
	r := s.execute(ctx, p, epoch, res.GetIdempotencyKey(), func(ctx context.Context, key string) (string, error) {
		return run(ctx, call, key)
	})
	return r, r.Err
}

// verifyInDoubt asks verify about the tool use in doubt res and records a
// definite answer; decided is the decision that made the result, 0 when the
// tool use stays in doubt.
func (s *Session) verifyInDoubt(ctx context.Context, res *savepointv1.Resolution, epoch uint64, run ToolFunc, verify VerifyFunc, log *slog.Logger) (r ToolResult, decided Decision, err error) {
	tu := res.GetToolUse()
	v, verr := verify(ctx, toolUse(tu), res.GetIdempotencyKey())
	if verr != nil {
		log.Warn("savepoint: reconcile: verify failed; the outcome stays unknown", "err", verr)
		return ToolResult{}, 0, nil
	}
	f := Finding{Done: v.Status == VerifyDone, Output: v.Output, IsError: v.IsError, Note: v.Note, ResolvedBy: "verify"}
	switch v.Status {
	case VerifyDone, VerifyNotDone:
	default:
		log.Warn("savepoint: reconcile: verify could not tell; the outcome stays unknown")
		return ToolResult{}, 0, nil
	}
	req := f.request(s.id, tu.GetToolUseId(), savepointv1.ResolverKind_RESOLVER_KIND_VERIFY)
	req.Epoch = &epoch
	resp, err := s.c.raw.ResolveEffect(ctx, req)
	if err != nil {
		return ToolResult{}, 0, fmt.Errorf("savepoint: reconcile: recording what verify found for tool use %q (%s): %w", tu.GetToolUseId(), tu.GetName(), err)
	}
	if v.Status == VerifyDone {
		log.Info("savepoint: reconcile: verify found the tool use done; its output is recorded and reused")
		eff := resp.GetEntry().GetEffect()
		return ToolResult{ToolUseID: tu.GetToolUseId(), Content: eff.GetOutput(), IsError: eff.GetIsError()}, DecisionReuse, nil
	}
	log.Info("savepoint: reconcile: verify found the tool use not done; running it again with its idempotency key")
	r, err = s.runReconciled(ctx, res, epoch, run, log)
	return r, DecisionRun, err
}

// pendingToolUse returns the pending tool use with this id, or nil. s.mu is
// held.
func (s *Session) pendingToolUse(id string) *savepointv1.ToolUse {
	for _, p := range s.pending {
		if p.GetToolUseId() == id {
			return p
		}
	}
	return nil
}

func (s *Session) unstart(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.started, id)
}

// recordTimeout bounds a RecordEffect. It runs even when the caller's
// context has ended: the tool ran, and its outcome is a fact worth keeping.
const recordTimeout = 30 * time.Second

// execute is the one place a tool runs: BeginEffect unless READ_ONLY, then
// fn, then RecordEffect of fn's real outcome. The caller marked p started.
func (s *Session) execute(ctx context.Context, p *savepointv1.ToolUse, epoch uint64, key string, fn func(ctx context.Context, key string) (string, error)) ToolResult {
	id := p.GetToolUseId()
	requires := s.c.cfg.approval[p.GetName()]
	if effectiveClass(p.GetEffectClass()) != ReadOnly || requires {
		b, err := s.c.raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: s.id, ToolUseId: id, Epoch: epoch, RequiresApproval: requires,
			// The request id makes a retry after a lost answer get the first one.
			RequestId: uuid.NewString()})
		if err != nil {
			s.unstart(id)
			return ToolResult{ToolUseID: id, Err: fmt.Errorf("savepoint: tool use %q (%s) not run: BeginEffect: %w", id, p.GetName(), err)}
		}
		if d := b.GetDuplicate(); d != nil {
			// Not run: the same call of an earlier run answers it.
			return ToolResult{ToolUseID: id, Content: d.GetToolResultText(), IsError: d.GetIsError(), DuplicateOf: d.GetToolUseId()}
		}
		switch b.GetDecision() {
		case savepointv1.Decision_DECISION_AWAIT_APPROVAL:
			s.unstart(id)
			return ToolResult{ToolUseID: id, Err: &AwaitingApprovalError{SessionID: s.id, Call: toolUse(p), Approval: b.GetApproval()}}
		case savepointv1.Decision_DECISION_DENIED:
			return s.denied(ctx, p, b.GetApproval())
		}
		key = b.GetIdempotencyKey()
		s.hook(ToolEvent{Stage: StageBegun, Call: toolUse(p)})
	}
	out, err := fn(ctx, key)
	r := ToolResult{ToolUseID: id, Content: out}
	if err != nil {
		r.Content, r.IsError = err.Error(), true
	}
	s.hook(ToolEvent{Stage: StageRan, Call: toolUse(p), Result: r})
	if err := s.record(ctx, p, r); err != nil {
		r.LedgerErr = fmt.Errorf("savepoint: tool use %q (%s) ran but its outcome is not in the ledger: %w", id, p.GetName(), err)
		s.c.reportLedgerError(s.id, p, r, err)
	} else {
		s.hook(ToolEvent{Stage: StageRecorded, Call: toolUse(p), Result: r})
	}
	s.mu.Lock()
	s.ran[id] = r
	s.mu.Unlock()
	return r
}

func (s *Session) record(ctx context.Context, p *savepointv1.ToolUse, r ToolResult) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err := s.c.raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{
		SessionId: s.id, ToolUseId: p.GetToolUseId(), Name: p.GetName(), Output: r.Content, IsError: r.IsError, RequestId: uuid.NewString(),
	})
	return err
}

func (c *Client) reportLedgerError(session string, p *savepointv1.ToolUse, r ToolResult, err error) {
	c.cfg.logger.Error("savepoint: LEDGER WRITE FAILED: the tool ran, its side effect may have happened, "+
		"and its outcome is not recorded; if the agent stops before PointB, resume will report this call as in doubt; check it by hand",
		"session", session, "tool_use_id", p.GetToolUseId(), "name", p.GetName(), "tool_is_error", r.IsError, "err", err)
	if c.cfg.onLedgerError != nil {
		c.cfg.onLedgerError(toolUse(p), r, err)
	}
}

// ToolResultsFunc turns the results of one turn, in the order their tool
// uses were named, into the message(s) PointB appends.
type ToolResultsFunc func(results []ToolResult) ([]Message, error)

// AnthropicToolResults is the default ToolResultsFunc: one message with role
// "user" whose content is an array of Anthropic tool_result blocks,
// {"type":"tool_result","tool_use_id":...,"content":...,"is_error":true},
// with is_error left out when false.
func AnthropicToolResults(results []ToolResult) ([]Message, error) {
	type block struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   any    `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	if len(results) == 0 {
		return nil, nil
	}
	blocks := make([]block, 0, len(results))
	for _, r := range results {
		var content any = r.Content
		if raw, ok := ToolContent(r.Content); ok && !r.IsError {
			content = raw
		}
		blocks = append(blocks, block{Type: "tool_result", ToolUseID: r.ToolUseID, Content: content, IsError: r.IsError})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(blocks); err != nil {
		return nil, err
	}
	return []Message{{Role: "user", ContentJSON: string(bytes.TrimRight(buf.Bytes(), "\n"))}}, nil
}

// ToolContent reports whether a tool's output (or a ledger output) is a list
// of content blocks, and returns it as JSON: it is when the text is a
// non-empty JSON array of objects that each have a string "type". Every
// client reads the ledger by this rule (client/testdata/tool_content.json).
func ToolContent(output string) (json.RawMessage, bool) {
	if !strings.HasPrefix(output, "[") {
		return nil, false
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(output), &blocks); err != nil || len(blocks) == 0 {
		return nil, false
	}
	for _, b := range blocks {
		if t := b["type"]; len(t) == 0 || t[0] != '"' {
			return nil, false
		}
	}
	return json.RawMessage(output), true
}

// ContentBlocks returns the output of a tool that answers with content
// blocks (each a JSON object with a string "type", such as
// {"type":"text","text":...} or an image): their JSON array, which the
// ledger stores and AnthropicToolResults sends as the blocks.
func ContentBlocks(blocks ...any) (string, error) {
	if len(blocks) == 0 {
		return "", fmt.Errorf("savepoint: ContentBlocks: no blocks")
	}
	b, err := json.Marshal(blocks)
	if err != nil {
		return "", fmt.Errorf("savepoint: ContentBlocks: %w", err)
	}
	if _, ok := ToolContent(string(b)); !ok {
		return "", fmt.Errorf("savepoint: ContentBlocks: each block must be a JSON object with a string type")
	}
	return string(b), nil
}

// ErrAwaitingApproval is wrapped by the Err of a result whose tool requires
// approval and has none for its call and input: the tool did not run.
// errors.As finds the *AwaitingApprovalError with the call.
var ErrAwaitingApproval = errors.New("savepoint: tool use awaiting approval")

// AwaitingApprovalError says which call waits for a person's approval
// (savepoint approve SESSION TOOL_USE_ID, or Client.ApproveEffect); once
// decided, run it again (Reconcile, after a resume).
type AwaitingApprovalError struct {
	SessionID string
	Call      ToolUse
	// Approval is the daemon's record of the request: its input digest and
	// when it was first asked.
	Approval *savepointv1.EffectApproval
}

func (e *AwaitingApprovalError) Error() string {
	return fmt.Sprintf("savepoint: tool use %q (%s) of session %q not run: it waits for approval (savepoint approve %s %s)",
		e.Call.ToolUseID, e.Call.Name, e.SessionID, e.SessionID, e.Call.ToolUseID)
}

func (e *AwaitingApprovalError) Unwrap() error { return ErrAwaitingApproval }

// DeniedText is the tool result the model is given for a denied call.
func DeniedText(a *savepointv1.EffectApproval) string {
	by := a.GetDecidedBy()
	if by == "" {
		by = "a person"
	}
	if a.GetNote() == "" {
		return fmt.Sprintf("This call was denied by %s; it did not run.", by)
	}
	return fmt.Sprintf("This call was denied by %s; it did not run. Their note: %s", by, a.GetNote())
}

// denied answers the call p a person denied: its note as an is_error
// result, recorded as refused so that later resumes reuse it.
func (s *Session) denied(ctx context.Context, p *savepointv1.ToolUse, a *savepointv1.EffectApproval) ToolResult {
	r := ToolResult{ToolUseID: p.GetToolUseId(), Content: DeniedText(a), IsError: true, Decision: DecisionDenied}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, err := s.c.raw.RecordEffect(rctx, &savepointv1.RecordEffectRequest{
		SessionId: s.id, ToolUseId: p.GetToolUseId(), Name: p.GetName(), Output: r.Content, IsError: true, Refused: true,
	}); err != nil {
		r.LedgerErr = fmt.Errorf("savepoint: tool use %q (%s) was denied but the denial is not in the ledger: %w", p.GetToolUseId(), p.GetName(), err)
	}
	s.mu.Lock()
	s.ran[p.GetToolUseId()] = r
	s.mu.Unlock()
	return r
}
