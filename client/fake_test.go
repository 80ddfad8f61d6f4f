package client

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// fake is an in-memory SavepointService with the daemon's rules, enough of
// them for the client's tests, plus fault injection and an event log.
type fake struct {
	savepointv1.UnimplementedSavepointServiceServer

	mu       sync.Mutex
	sessions map[string]*fakeSession
	tombs    map[string]uint64
	events   []string // "begin:ID", "record:ID", ... in order; tests add "run:ID"
	saves    []*savepointv1.SaveCheckpointRequest
	pageSize int // messages per Resume/ListMessages page; 0: all

	// Fault injection.
	saveFailAfterApply int   // the next N saves are applied, then answered UNAVAILABLE
	beginErr           error // returned by BeginEffect
	recordErr          error // returned by RecordEffect
	keys               int
}

type fakeSession struct {
	revision, epoch uint64
	resumed         bool
	messages        []*savepointv1.Message
	pending         []*savepointv1.ToolUse
	task            string
	turn            uint32
	tokens          uint64
	state           string
	labels          map[string]string
	begun           map[string]string // tool_use_id -> idempotency key
	effects         map[string]*savepointv1.Effect
	everPending     map[string]bool
	requests        map[string]fakeRequest
}

type fakeRequest struct {
	req  *savepointv1.SaveCheckpointRequest
	resp *savepointv1.SaveCheckpointResponse
}

func newFake() *fake {
	return &fake{sessions: map[string]*fakeSession{}, tombs: map[string]uint64{}}
}

func infoErr(code codes.Code, reason string, md map[string]string) error {
	st, err := status.New(code, "fake: "+reason).WithDetails(&errdetails.ErrorInfo{Domain: Domain, Reason: reason, Metadata: md})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (s *fakeSession) md() map[string]string {
	return map[string]string{"current_revision": strconv.FormatUint(s.revision, 10), "current_epoch": strconv.FormatUint(s.epoch, 10)}
}

func (s *fakeSession) fence(epoch uint64) error {
	if epoch == s.epoch || (epoch == 0 && !s.resumed) {
		return nil
	}
	return infoErr(codes.Aborted, "SESSION_FENCED", s.md())
}

func (f *fake) event(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func (f *fake) eventLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func (f *fake) SaveCheckpoint(_ context.Context, req *savepointv1.SaveCheckpointRequest) (*savepointv1.SaveCheckpointResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saves = append(f.saves, proto.CloneOf(req))
	resp, err := f.save(req)
	if err == nil && f.saveFailAfterApply > 0 {
		f.saveFailAfterApply--
		// As savepointd answers a save whose COMMIT lost its answer.
		return nil, infoErr(codes.Unavailable, "COMMIT_OUTCOME_UNKNOWN", nil)
	}
	return resp, err
}

func (f *fake) save(req *savepointv1.SaveCheckpointRequest) (*savepointv1.SaveCheckpointResponse, error) {
	s := f.sessions[req.GetSessionId()]
	if s != nil && req.GetRequestId() != "" {
		if prev, ok := s.requests[req.GetRequestId()]; ok {
			a, b := proto.CloneOf(prev.req), proto.CloneOf(req)
			if !proto.Equal(a, b) {
				return nil, infoErr(codes.InvalidArgument, "REQUEST_ID_REUSED", nil)
			}
			return prev.resp, nil
		}
	}
	switch {
	case s != nil:
		if err := s.fence(req.GetEpoch()); err != nil {
			return nil, err
		}
		if req.GetExpectedRevision() == 0 {
			return nil, infoErr(codes.AlreadyExists, "SESSION_EXISTS", s.md())
		}
		if req.GetExpectedRevision() != s.revision {
			return nil, infoErr(codes.Aborted, "REVISION_MISMATCH", s.md())
		}
	case req.GetExpectedRevision() != 0:
		return nil, infoErr(codes.NotFound, "SESSION_NOT_FOUND", nil)
	default:
		s = &fakeSession{epoch: f.tombs[req.GetSessionId()] + 1, begun: map[string]string{},
			effects: map[string]*savepointv1.Effect{}, everPending: map[string]bool{}, requests: map[string]fakeRequest{}}
	}
	for _, p := range req.GetPendingToolUses() {
		if s.effects[p.GetToolUseId()] != nil {
			return nil, infoErr(codes.FailedPrecondition, "CALL_ALREADY_RECORDED", s.md())
		}
	}
	f.sessions[req.GetSessionId()] = s
	if k := req.KeepMessages; k != nil {
		if *k > uint64(len(s.messages)) {
			return nil, infoErr(codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE", s.md())
		}
		s.messages = s.messages[:*k:*k]
	}
	s.messages = append(s.messages, req.GetAppendMessages()...)
	s.pending = req.GetPendingToolUses()
	for _, p := range s.pending {
		s.everPending[p.GetToolUseId()] = true
	}
	s.task, s.turn, s.tokens, s.state, s.labels = req.GetTask(), req.GetTurn(), req.GetTokensUsed(), req.GetStateJson(), maps.Clone(req.GetLabels())
	s.revision++
	resp := &savepointv1.SaveCheckpointResponse{Revision: s.revision, MessageCount: uint64(len(s.messages)), Epoch: s.epoch}
	if req.GetRequestId() != "" {
		s.requests[req.GetRequestId()] = fakeRequest{proto.CloneOf(req), resp}
	}
	return resp, nil
}

func (f *fake) session(id string) (*fakeSession, error) {
	s := f.sessions[id]
	if s == nil {
		return nil, infoErr(codes.NotFound, "SESSION_NOT_FOUND", nil)
	}
	return s, nil
}

func (f *fake) BeginEffect(_ context.Context, req *savepointv1.BeginEffectRequest) (*savepointv1.BeginEffectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "begin:"+req.GetToolUseId())
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := s.fence(req.GetEpoch()); err != nil {
		return nil, err
	}
	if !pendingIn(s.pending, req.GetToolUseId()) {
		return nil, infoErr(codes.FailedPrecondition, "CALL_NOT_PENDING", s.md())
	}
	key, already := s.begun[req.GetToolUseId()]
	if !already {
		f.keys++
		key = fmt.Sprintf("key-%d", f.keys)
		s.begun[req.GetToolUseId()] = key
	}
	return &savepointv1.BeginEffectResponse{IdempotencyKey: key, AlreadyBegun: already}, nil
}

func pendingIn(pending []*savepointv1.ToolUse, id string) bool {
	for _, p := range pending {
		if p.GetToolUseId() == id {
			return true
		}
	}
	return false
}

func (f *fake) RecordEffect(_ context.Context, req *savepointv1.RecordEffectRequest) (*savepointv1.RecordEffectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("record:%s:%v", req.GetToolUseId(), req.GetIsError()))
	if f.recordErr != nil {
		return nil, f.recordErr
	}
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if !s.everPending[req.GetToolUseId()] {
		return nil, infoErr(codes.NotFound, "CALL_UNKNOWN", nil)
	}
	e := &savepointv1.Effect{ToolUseId: req.GetToolUseId(), Name: req.GetName(), Output: req.GetOutput(), IsError: req.GetIsError()}
	if prev := s.effects[req.GetToolUseId()]; prev != nil {
		if !proto.Equal(prev, e) {
			return nil, infoErr(codes.AlreadyExists, "EFFECT_CONFLICT", s.md())
		}
		return &savepointv1.RecordEffectResponse{Effect: prev, AlreadyRecorded: true}, nil
	}
	s.effects[req.GetToolUseId()] = e
	return &savepointv1.RecordEffectResponse{Effect: e}, nil
}

func (f *fake) page(s *fakeSession, start int) ([]*savepointv1.Message, string) {
	end := len(s.messages)
	if f.pageSize > 0 && start+f.pageSize < end {
		end = start + f.pageSize
	}
	token := ""
	if end < len(s.messages) {
		token = fmt.Sprintf("%d@%d", end, s.revision)
	}
	return s.messages[start:end], token
}

func (f *fake) Resume(_ context.Context, req *savepointv1.ResumeRequest) (*savepointv1.ResumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	s.epoch++
	s.resumed = true
	msgs, token := f.page(s, 0)
	return &savepointv1.ResumeResponse{
		Checkpoint: &savepointv1.Checkpoint{
			SessionId: req.GetSessionId(), Revision: s.revision, Epoch: s.epoch, Task: s.task, Turn: s.turn,
			TokensUsed: s.tokens, MessageCount: uint64(len(s.messages)), Messages: msgs,
			PendingToolUses: s.pending, StateJson: s.state, Labels: s.labels,
		},
		Epoch: s.epoch, NextPageToken: token,
	}, nil
}

func (f *fake) ListMessages(_ context.Context, req *savepointv1.ListMessagesRequest) (*savepointv1.ListMessagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	var start int
	var rev uint64
	if _, err := fmt.Sscanf(req.GetPageToken(), "%d@%d", &start, &rev); err != nil && req.GetPageToken() != "" {
		return nil, infoErr(codes.InvalidArgument, "INVALID_PAGE_TOKEN", nil)
	}
	if rev != s.revision || req.GetRevision() != s.revision || start > len(s.messages) {
		return nil, infoErr(codes.InvalidArgument, "INVALID_PAGE_TOKEN", nil)
	}
	msgs, token := f.page(s, start)
	return &savepointv1.ListMessagesResponse{Messages: msgs, FirstIndex: uint64(start), Revision: s.revision, NextPageToken: token}, nil
}

func (f *fake) Reconcile(_ context.Context, req *savepointv1.ReconcileRequest) (*savepointv1.ReconcileResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp := &savepointv1.ReconcileResponse{Revision: s.revision}
	for _, p := range s.pending {
		key, begun := s.begun[p.GetToolUseId()]
		r := &savepointv1.Resolution{ToolUse: p, IdempotencyKey: key, Begun: begun}
		switch class := p.GetEffectClass(); {
		case s.effects[p.GetToolUseId()] != nil:
			r.Decision, r.Effect = DecisionReuse, s.effects[p.GetToolUseId()]
		case class == ReadOnly || class == Idempotent:
			r.Decision = DecisionRun
		case p.GetBeginTracked() && !begun:
			r.Decision = DecisionRun
		default:
			r.Decision = DecisionInDoubt
			r.ToolResultText = "outcome of " + p.GetName() + " unknown"
		}
		resp.Resolutions = append(resp.Resolutions, r)
	}
	return resp, nil
}

func (f *fake) DeleteSession(_ context.Context, req *savepointv1.DeleteSessionRequest) (*savepointv1.DeleteSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := s.fence(req.GetEpoch()); err != nil {
		return nil, err
	}
	delete(f.sessions, req.GetSessionId())
	f.tombs[req.GetSessionId()] = s.epoch
	return &savepointv1.DeleteSessionResponse{TombstoneEpoch: s.epoch}, nil
}

// serve starts f on an in-process listener and dials it with a fast retry
// policy and a silent logger; extra options come after those.
func serve(t *testing.T, f savepointv1.SavepointServiceServer, opts ...Option) *Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	savepointv1.RegisterSavepointServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	base := []Option{
		WithRetry(RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}),
		WithLogger(slog.New(slog.DiscardHandler)),
		WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })),
	}
	c, err := Dial(t.Context(), "localhost:1", append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
