package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// ListSessions page sizes.
const (
	defaultSessionsPageSize = 100
	maxSessionsPageSize     = 1000
)

// Server serves SavepointService over a Store: it validates each request,
// translates it to the Store's terms, and translates the result or error
// back. Its only state is its counters and the store's size, read at most
// once per core.SizeMaxAge.
type Server struct {
	savepointv1.UnimplementedSavepointServiceServer

	store    core.Store // raw, wrapped to notify hub of each acknowledged write
	raw      core.Store // as given to NewServer, for its optional interfaces
	size     core.Sizer // raw's size, read at most once per core.SizeMaxAge; nil when raw has none
	hub      *core.Hub
	lim      Limits
	logger   *slog.Logger
	version  string
	start    time.Time       // when the server was made; GetServerInfo's start_time
	shutdown context.Context // done once Shutdown is called
	stop     context.CancelFunc
	commit   string
	onDemand bool // GetServerInfo's started_on_demand
	inFlight int  // GetServerInfo's call_stream_max_in_flight

	saves atomic.Uint64 // SaveCheckpoint calls acknowledged
}

// NewServer returns a Server over store configured by opts (zero fields
// take their defaults). Its writes are watched by WatchSessions; a store
// that is a core.ChangePoller is polled every opts.PollInterval for the
// writes of other processes while anyone watches.
func NewServer(store core.Store, opts Options) *Server {
	opts = opts.withDefaults()
	hub := core.NewHub(store, opts.PollInterval)
	shutdown, stop := context.WithCancel(context.Background())
	s := &Server{store: &core.Notifying{Store: store, Notify: hub.Changed}, raw: store, hub: hub, lim: opts.Limits,
		logger: opts.Logger, version: opts.Version, commit: opts.Commit, onDemand: opts.StartedOnDemand, inFlight: opts.CallStreamMaxInFlight, start: time.Now(), shutdown: shutdown, stop: stop}
	if sz, ok := store.(core.Sizer); ok {
		s.size = &core.CachedSizer{Source: sz}
	}
	return s
}

// Shutdown ends every WatchSessions stream with UNAVAILABLE, so that a
// graceful stop need not wait for them; later watches end at once.
func (s *Server) Shutdown() { s.stop() }

// fail translates err for the client, logging it when it is internal.
func (s *Server) fail(ctx context.Context, err error) error {
	st := ToStatus(err)
	if st.Code() == codes.Internal {
		s.logger.ErrorContext(ctx, "internal error", "err", err)
	}
	return st.Err()
}

// SaveCheckpoint implements SavepointServiceServer.
func (s *Server) SaveCheckpoint(ctx context.Context, req *savepointv1.SaveCheckpointRequest) (*savepointv1.SaveCheckpointResponse, error) {
	sr, err := validateSave(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.SaveCheckpoint(ctx, sr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	s.saves.Add(1)
	return &savepointv1.SaveCheckpointResponse{
		Revision:     res.Revision,
		MessageCount: res.MessageCount,
		Epoch:        res.Epoch,
	}, nil
}

// BeginEffect implements SavepointServiceServer.
func (s *Server) BeginEffect(ctx context.Context, req *savepointv1.BeginEffectRequest) (*savepointv1.BeginEffectResponse, error) {
	reg, err := validateBegin(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	var res core.BeginResult
	if reg != nil {
		res, err = s.store.RegisterEffect(ctx, reg)
	} else {
		rid, _ := validateRequestID("request_id", req.GetRequestId()) // valid: validateBegin checked it
		res, err = s.store.BeginEffect(ctx, &core.BeginRequest{SessionID: req.GetSessionId(), ToolUseID: req.GetToolUseId(), Epoch: req.GetEpoch(),
			RequiresApproval: req.GetRequiresApproval(), RequestID: rid})
	}
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.BeginEffectResponse{
		IdempotencyKey: res.IdempotencyKey,
		AlreadyBegun:   res.AlreadyBegun,
		Decision:       decisionToProto(res.Decision),
		Approval:       approvalToProto(res.Approval),
		Duplicate:      duplicateToProto(res.Duplicate),
	}
	if res.Effect != nil {
		resp.Effect = effectToProto(*res.Effect)
	}
	return resp, nil
}

// RecordEffect implements SavepointServiceServer.
func (s *Server) RecordEffect(ctx context.Context, req *savepointv1.RecordEffectRequest) (*savepointv1.RecordEffectResponse, error) {
	e, err := validateRecord(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	stored, already, err := s.store.RecordEffect(ctx, req.GetSessionId(), e)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.RecordEffectResponse{Effect: effectToProto(stored), AlreadyRecorded: already}, nil
}

// ResolveEffect implements SavepointServiceServer.
func (s *Server) ResolveEffect(ctx context.Context, req *savepointv1.ResolveEffectRequest) (*savepointv1.ResolveEffectResponse, error) {
	r, err := validateResolve(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.ResolveEffect(ctx, r)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.ResolveEffectResponse{Entry: ledgerEntryToProto(res.Entry), AlreadyResolved: res.AlreadyResolved}, nil
}

// ApproveEffect implements SavepointServiceServer.
func (s *Server) ApproveEffect(ctx context.Context, req *savepointv1.ApproveEffectRequest) (*savepointv1.ApproveEffectResponse, error) {
	r, err := validateApprove(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.ApproveEffect(ctx, r)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.ApproveEffectResponse{Entry: ledgerEntryToProto(res.Entry), AlreadyDecided: res.AlreadyDecided}, nil
}

// Resume implements SavepointServiceServer.
func (s *Server) Resume(ctx context.Context, req *savepointv1.ResumeRequest) (*savepointv1.ResumeResponse, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	cp, err := s.store.Resume(ctx, req.GetSessionId(), req.GetReopen())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	pcp, next, err := s.firstPage(ctx, cp)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.ResumeResponse{Checkpoint: pcp, Epoch: cp.Epoch, NextPageToken: next}, nil
}

// Reconcile implements SavepointServiceServer.
func (s *Server) Reconcile(ctx context.Context, req *savepointv1.ReconcileRequest) (*savepointv1.ReconcileResponse, error) {
	if err := validateReconcile(req); err != nil {
		return nil, s.fail(ctx, err)
	}
	var rec core.Reconciliation
	var err error
	// A token made for a list of tool uses names the list by its digest,
	// so that it is refused with another.
	scope := req.GetSessionId()
	if ids := req.GetToolUseIds(); len(ids) > 0 {
		rec, err = core.ReconcileCalls(ctx, s.store, req.GetSessionId(), ids)
		sum := sha256.Sum256([]byte(strings.Join(ids, "\x00")))
		scope += "\x00" + hex.EncodeToString(sum[:8])
	} else {
		rec, err = core.ReconcileSession(ctx, s.store, req.GetSessionId())
	}
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	rev, resolutions := rec.Revision, rec.Resolutions
	start := uint64(0)
	if req.GetPageToken() != "" {
		if start, err = decodeResolutionsToken(req.GetPageToken(), scope, rev); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	if start > uint64(len(resolutions)) {
		return nil, s.fail(ctx, core.ErrInvalidPageToken)
	}
	resp := &savepointv1.ReconcileResponse{Revision: rev}
	size := 0
	for i, r := range resolutions[start:] {
		pr := &savepointv1.Resolution{
			ToolUse:        toolUseToProto(r.ToolUse.ToolUse),
			Decision:       decisionToProto(r.Decision),
			IdempotencyKey: r.ToolUse.IdempotencyKey,
			ToolResultText: r.ToolResultText,
			Begun:          r.ToolUse.Begun,
		}
		if r.ToolUse.Effect != nil {
			pr.Effect = effectToProto(*r.ToolUse.Effect)
		}
		pr.Resolution = resolutionToProto(r.ToolUse.Resolution)
		pr.Approval = approvalToProto(r.ToolUse.Approval)
		// Every page holds at least one resolution; one fits the budget,
		// since an output and an input are each capped below it.
		if size += proto.Size(pr) + 16; i > 0 && size > s.lim.ResponseBudgetBytes {
			resp.NextPageToken = resolutionsToken(scope, rev, start+uint64(i)).encode()
			break
		}
		resp.Resolutions = append(resp.Resolutions, pr)
	}
	return resp, nil
}

// GetSession implements SavepointServiceServer. A revision set to 0 reads
// the latest, like an unset one.
func (s *Server) GetSession(ctx context.Context, req *savepointv1.GetSessionRequest) (*savepointv1.GetSessionResponse, error) {
	if err := validateSessionID("session_id", req.GetSessionId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	cp, err := s.store.Checkpoint(ctx, req.GetSessionId(), req.GetRevision())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	pcp, next, err := s.firstPage(ctx, cp)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.GetSessionResponse{Checkpoint: pcp, NextPageToken: next}, nil
}

// firstPage returns cp with as many messages from the first on as fit the
// response budget left by the rest of the checkpoint, and the token for the
// remaining messages, if any.
func (s *Server) firstPage(ctx context.Context, cp core.Checkpoint) (*savepointv1.Checkpoint, string, error) {
	pcp := checkpointToProto(cp)
	if cp.MessageCount == 0 {
		return pcp, "", nil
	}
	var msgs []core.Message
	budget := s.lim.ResponseBudgetBytes - fixedSize(cp.Task, cp.StateJSON, cp.Labels, cp.PendingToolUses) - len(cp.FinalOutput)
	if budget > 0 {
		var err error
		msgs, err = s.store.Messages(ctx, cp.SessionID, cp.Revision, 0, budget, 0)
		if err != nil {
			return nil, "", err
		}
		// The store returns a first message even when it is over budget;
		// ListMessages, with the whole budget, returns it instead.
		if len(msgs) > 0 && core.MessageSize(msgs[0]) > budget {
			msgs = nil
		}
	}
	pcp.Messages = messagesToProto(msgs)
	if n := uint64(len(msgs)); n < cp.MessageCount {
		return pcp, messagesToken(cp.SessionID, cp.Revision, n).encode(), nil
	}
	return pcp, "", nil
}

// ListMessages implements SavepointServiceServer.
func (s *Server) ListMessages(ctx context.Context, req *savepointv1.ListMessagesRequest) (*savepointv1.ListMessagesResponse, error) {
	if err := validateListMessages(req); err != nil {
		return nil, s.fail(ctx, err)
	}
	revision, start := req.GetRevision(), uint64(0)
	if req.GetPageToken() != "" {
		t, err := decodeMessagesToken(req.GetPageToken(), req.GetSessionId(), revision)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		revision, start = t.revision, t.next
	}
	cp, err := s.store.Checkpoint(ctx, req.GetSessionId(), revision)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if start > cp.MessageCount {
		return nil, s.fail(ctx, core.ErrInvalidPageToken)
	}
	resp := &savepointv1.ListMessagesResponse{FirstIndex: start, Revision: cp.Revision}
	if start == cp.MessageCount {
		return resp, nil
	}
	msgs, err := s.store.Messages(ctx, cp.SessionID, cp.Revision, start, s.lim.ResponseBudgetBytes, int(req.GetPageSize()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp.Messages = messagesToProto(msgs)
	if next := start + uint64(len(msgs)); next < cp.MessageCount {
		resp.NextPageToken = messagesToken(cp.SessionID, cp.Revision, next).encode()
	}
	return resp, nil
}

// ListSessions implements SavepointServiceServer. A page holds at most
// page_size sessions (0 means 100, more than 1000 means 1000) and stops early
// at the response budget.
func (s *Server) ListSessions(ctx context.Context, req *savepointv1.ListSessionsRequest) (*savepointv1.ListSessionsResponse, error) {
	filter, err := validateListSessions(req, time.Now())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	byUpdate, err := validateOrderBy(req.GetOrderBy())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	size := pageSize(req.GetPageSize())
	query := sessionsQuery{labels: filter.Labels, status: filter.Status, hasPending: filter.HasPendingToolUses, minIdle: req.GetMinIdle().AsDuration()}
	var sums []core.SessionSummary
	if byUpdate {
		var after core.UpdateCursor
		if req.GetPageToken() != "" {
			if after, err = decodeByUpdateToken(req.GetPageToken(), query); err != nil {
				return nil, s.fail(ctx, err)
			}
		}
		sums, err = s.store.ListSessionsByUpdate(ctx, after, size+1, filter)
	} else {
		var after string
		if req.GetPageToken() != "" {
			if after, err = decodeSessionsToken(req.GetPageToken(), query); err != nil {
				return nil, s.fail(ctx, err)
			}
		}
		sums, err = s.store.ListSessions(ctx, after, size+1, filter)
	}
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.ListSessionsResponse{}
	budget := s.lim.ResponseBudgetBytes
	for i, sum := range sums {
		n := len(sum.SessionID) + fixedSize(sum.Task, "", sum.Labels, nil)
		if i == size || (i > 0 && n > budget) {
			if byUpdate {
				resp.NextPageToken = byUpdateToken(query, sums[i-1]).encode()
			} else {
				resp.NextPageToken = sessionsToken(query, sums[i-1].SessionID).encode()
			}
			break
		}
		budget -= n
		resp.Sessions = append(resp.Sessions, summaryToProto(sum))
	}
	return resp, nil
}

// pageSize is the number of items a page of ListSessions or ListEffects
// holds at most: 0 means 100, more than 1000 means 1000.
func pageSize(n int32) int {
	switch {
	case n == 0:
		return defaultSessionsPageSize
	case n > maxSessionsPageSize:
		return maxSessionsPageSize
	}
	return int(n)
}

// CompleteSession implements SavepointServiceServer.
func (s *Server) CompleteSession(ctx context.Context, req *savepointv1.CompleteSessionRequest) (*savepointv1.CompleteSessionResponse, error) {
	cr, err := validateComplete(s.lim, req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.CompleteSession(ctx, cr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &savepointv1.CompleteSessionResponse{
		Revision: res.Revision, Epoch: res.Epoch, Status: statusToProto(res.Status), AlreadyCompleted: res.Already,
	}, nil
}

// ListEffects implements SavepointServiceServer. A page holds at most
// page_size entries (0 means 100, more than 1000 means 1000) and stops early
// at the response budget, always holding one entry when any is left.
func (s *Server) ListEffects(ctx context.Context, req *savepointv1.ListEffectsRequest) (*savepointv1.ListEffectsResponse, error) {
	if err := validateListEffects(req); err != nil {
		return nil, s.fail(ctx, err)
	}
	var after string
	if req.GetPageToken() != "" {
		var err error
		if after, err = decodeEffectsToken(req.GetPageToken(), req.GetSessionId()); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	size := pageSize(req.GetPageSize())
	entries, err := s.store.Effects(ctx, req.GetSessionId(), after, size+1)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp := &savepointv1.ListEffectsResponse{}
	used := 0
	for i, e := range entries {
		pe := ledgerEntryToProto(e)
		used += proto.Size(pe) + 16
		if i == size || (i > 0 && used > s.lim.ResponseBudgetBytes) {
			resp.NextPageToken = effectsToken(req.GetSessionId(), entries[i-1].ToolUseID).encode()
			break
		}
		resp.Entries = append(resp.Entries, pe)
	}
	return resp, nil
}

// ForkSession implements SavepointServiceServer.
func (s *Server) ForkSession(ctx context.Context, req *savepointv1.ForkSessionRequest) (*savepointv1.ForkSessionResponse, error) {
	fr, err := validateFork(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.ForkSession(ctx, fr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	performed, inDoubt, truncated := s.branchLists(res)
	return &savepointv1.ForkSessionResponse{Revision: res.Revision, Epoch: res.Epoch, MessageCount: res.MessageCount,
		PerformedAfter: performed, InDoubtAfter: inDoubt, ListsTruncated: truncated}, nil
}

// RewindSession implements SavepointServiceServer.
func (s *Server) RewindSession(ctx context.Context, req *savepointv1.RewindSessionRequest) (*savepointv1.RewindSessionResponse, error) {
	rr, err := validateRewind(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.store.RewindSession(ctx, rr)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	performed, inDoubt, truncated := s.branchLists(res)
	return &savepointv1.RewindSessionResponse{Revision: res.Revision, Epoch: res.Epoch, MessageCount: res.MessageCount,
		PerformedAfter: performed, InDoubtAfter: inDoubt, ListsTruncated: truncated}, nil
}

// branchLists is the wire form of a branch's lists. An output is cut to
// its share of the response budget, marked by a trailing "…", and entries
// past the budget are left out (truncated), so the response always fits;
// ListEffects of the source gives them whole.
func (s *Server) branchLists(res core.BranchResult) (performed, inDoubt []*savepointv1.LedgerEntry, truncated bool) {
	n := len(res.PerformedAfter) + len(res.InDoubtAfter)
	per := s.lim.ResponseBudgetBytes / max(n, 1)
	used := 0
	add := func(dst *[]*savepointv1.LedgerEntry, e core.LedgerEntry) {
		pe := ledgerEntryToProto(e)
		if out := pe.GetEffect().GetOutput(); len(out) > per/2 {
			pe.Effect.Output = strings.ToValidUTF8(out[:per/2], "") + "…"
		}
		if used += proto.Size(pe) + 16; used > s.lim.ResponseBudgetBytes {
			truncated = true
			return
		}
		*dst = append(*dst, pe)
	}
	for _, e := range res.PerformedAfter {
		add(&performed, e)
	}
	for _, e := range res.InDoubtAfter {
		add(&inDoubt, e)
	}
	return performed, inDoubt, truncated
}
