package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// fakeStore is a one-session Store that returns canned data, for testing
// the adapter's translation only. Methods the embedded nil Store leaves out
// panic.
type fakeStore struct {
	core.Store
	err      error // returned by every method when set
	calls    int   // number of method calls
	cp       core.Checkpoint
	msgs     []core.Message
	sessions []core.SessionSummary
	pending  []core.PendingToolUse
	saved    *core.SaveRequest
	limit    int                // the last ListSessions or Effects limit
	filter   core.SessionFilter // the last ListSessions filter
	ledger   []core.LedgerEntry
	reopen   bool // the last Resume's reopen
}

func (f *fakeStore) CompleteSession(_ context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	if err := f.call(); err != nil {
		return core.CompleteResult{}, err
	}
	return core.CompleteResult{Revision: f.cp.Revision, Epoch: req.Epoch, Status: req.Status}, nil
}

func (f *fakeStore) Effects(_ context.Context, sessionID, after string, limit int) ([]core.LedgerEntry, error) {
	if err := f.call(); err != nil {
		return nil, err
	}
	f.limit = limit
	var out []core.LedgerEntry
	for _, e := range f.ledger {
		if e.ToolUseID > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeStore) call() error { f.calls++; return f.err }

func (f *fakeStore) SaveCheckpoint(_ context.Context, req *core.SaveRequest) (core.SaveResult, error) {
	if err := f.call(); err != nil {
		return core.SaveResult{}, err
	}
	f.saved = req
	return core.SaveResult{Revision: req.ExpectedRevision + 1, MessageCount: uint64(len(req.AppendMessages)), Epoch: 1}, nil
}

func (f *fakeStore) BeginEffect(_ context.Context, req *core.BeginRequest) (core.BeginResult, error) {
	if err := f.call(); err != nil {
		return core.BeginResult{}, err
	}
	return core.BeginResult{IdempotencyKey: "key-" + req.ToolUseID, AlreadyBegun: true}, nil
}

func (f *fakeStore) RecordEffect(_ context.Context, sessionID string, e core.Effect) (core.Effect, bool, error) {
	if err := f.call(); err != nil {
		return core.Effect{}, false, err
	}
	e.RecordTime, e.Late = time.Unix(1700000000, 5).UTC(), true
	return e, false, nil
}

func (f *fakeStore) Resume(_ context.Context, sessionID string, reopen bool) (core.Checkpoint, error) {
	if err := f.call(); err != nil {
		return core.Checkpoint{}, err
	}
	f.reopen = reopen
	f.cp.Epoch++
	return f.cp, nil
}

func (f *fakeStore) Checkpoint(_ context.Context, sessionID string, revision uint64) (core.Checkpoint, error) {
	if err := f.call(); err != nil {
		return core.Checkpoint{}, err
	}
	if revision != 0 && revision != f.cp.Revision {
		return core.Checkpoint{}, fmt.Errorf("%s@%d: %w", sessionID, revision, core.ErrRevisionNotFound)
	}
	return f.cp, nil
}

func (f *fakeStore) Messages(_ context.Context, sessionID string, revision, start uint64, maxBytes, maxCount int) ([]core.Message, error) {
	if err := f.call(); err != nil {
		return nil, err
	}
	var out []core.Message
	size := 0
	for _, m := range f.msgs[start:] {
		size += core.MessageSize(m)
		if len(out) > 0 && (size > maxBytes || (maxCount > 0 && len(out) == maxCount)) {
			break
		}
		out = append(out, m)
	}
	return out, nil
}

func (f *fakeStore) PendingToolUses(_ context.Context, sessionID string) (uint64, []core.PendingToolUse, error) {
	if err := f.call(); err != nil {
		return 0, nil, err
	}
	return f.cp.Revision, f.pending, nil
}

func (f *fakeStore) ListSessions(_ context.Context, after string, limit int, filter core.SessionFilter) ([]core.SessionSummary, error) {
	if err := f.call(); err != nil {
		return nil, err
	}
	f.limit = limit
	f.filter = filter
	var out []core.SessionSummary
	for _, s := range f.sessions {
		if s.SessionID > after && len(out) < limit {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeStore) DeleteSession(_ context.Context, sessionID string, epoch uint64) (uint64, error) {
	if err := f.call(); err != nil {
		return 0, err
	}
	return epoch + 1, nil
}

func (f *fakeStore) Verify(context.Context) (core.VerifyReport, error) {
	return core.VerifyReport{}, f.call()
}

var bg = context.Background()

// wantStatus fails unless err is a status with the code and reason.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("err = %v, want %v", err, code)
	}
	if info := errorInfo(t, st); info.Reason != reason {
		t.Fatalf("reason = %s, want %s (%v)", info.Reason, reason, err)
	}
}

func TestServerStoreErrors(t *testing.T) {
	f := &fakeStore{err: &core.StateError{Err: core.ErrSessionFenced, Msg: "epoch 1 < 2", CurrentRevision: 4, CurrentEpoch: 2}}
	s := NewServer(f, Options{})
	s.logger = slog.New(slog.DiscardHandler)
	calls := map[string]func() error{
		"SaveCheckpoint": func() error { _, err := s.SaveCheckpoint(bg, validSave()); return err },
		"BeginEffect": func() error {
			_, err := s.BeginEffect(bg, &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "t"})
			return err
		},
		"RecordEffect": func() error {
			_, err := s.RecordEffect(bg, &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "t"})
			return err
		},
		"Resume":     func() error { _, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "s"}); return err },
		"Reconcile":  func() error { _, err := s.Reconcile(bg, &savepointv1.ReconcileRequest{SessionId: "s"}); return err },
		"GetSession": func() error { _, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"}); return err },
		"ListMessages": func() error {
			_, err := s.ListMessages(bg, &savepointv1.ListMessagesRequest{SessionId: "s"})
			return err
		},
		"ListSessions": func() error { _, err := s.ListSessions(bg, &savepointv1.ListSessionsRequest{}); return err },
		"CompleteSession": func() error {
			_, err := s.CompleteSession(bg, &savepointv1.CompleteSessionRequest{SessionId: "s", Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED})
			return err
		},
		"ListEffects": func() error { _, err := s.ListEffects(bg, &savepointv1.ListEffectsRequest{SessionId: "s"}); return err },
		"DeleteSession": func() error {
			_, err := s.DeleteSession(bg, &savepointv1.DeleteSessionRequest{SessionId: "s"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			wantStatus(t, err, codes.Aborted, "SESSION_FENCED")
			if md := errorInfo(t, status.Convert(err)).Metadata; md["current_epoch"] != "2" || md["current_revision"] != "4" {
				t.Errorf("metadata = %v", md)
			}
		})
	}

	f.err = fmt.Errorf("disk on fire")
	_, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "s"})
	wantStatus(t, err, codes.Internal, ReasonInternal)
	if strings.Contains(err.Error(), "fire") {
		t.Errorf("internal error text leaked: %v", err)
	}
}

func TestServerValidatesFirst(t *testing.T) {
	f := &fakeStore{}
	s := NewServer(f, Options{})
	_, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "../etc"})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_SESSION_ID")
	req := validSave()
	req.AppendMessages[0].ContentJson = "{"
	_, err = s.SaveCheckpoint(bg, req)
	wantStatus(t, err, codes.InvalidArgument, "INVALID_JSON")
	if md := errorInfo(t, status.Convert(err)).Metadata; md["field"] != "append_messages[0].content_json" {
		t.Errorf("metadata = %v", md)
	}
	_, err = s.ListSessions(bg, &savepointv1.ListSessionsRequest{PageSize: -1})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_PAGE_SIZE")
	if f.calls != 0 {
		t.Errorf("the store was called %d times for invalid requests", f.calls)
	}
}

func TestServerSaveBeginRecordDelete(t *testing.T) {
	f := &fakeStore{}
	s := NewServer(f, Options{})
	req := validSave()
	req.ExpectedRevision = 2
	resp, err := s.SaveCheckpoint(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(resp, &savepointv1.SaveCheckpointResponse{Revision: 3, MessageCount: 2, Epoch: 1}) {
		t.Errorf("save response = %v", resp)
	}
	if f.saved == nil || f.saved.SessionID != "s1" || len(f.saved.PendingToolUses) != 2 {
		t.Errorf("store got %+v", f.saved)
	}

	begin, err := s.BeginEffect(bg, &savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "t1", Epoch: 1})
	if err != nil || begin.GetIdempotencyKey() != "key-t1" || !begin.GetAlreadyBegun() {
		t.Errorf("BeginEffect = %v, %v", begin, err)
	}

	rec, err := s.RecordEffect(bg, &savepointv1.RecordEffectRequest{SessionId: "s1", ToolUseId: "t1", Name: "send_email", Output: "sent", IsError: true})
	if err != nil {
		t.Fatal(err)
	}
	e := rec.GetEffect()
	if e.GetToolUseId() != "t1" || e.GetName() != "send_email" || e.GetOutput() != "sent" || !e.GetIsError() || !e.GetLate() ||
		!e.GetRecordTime().AsTime().Equal(time.Unix(1700000000, 5)) {
		t.Errorf("RecordEffect = %v", rec)
	}

	del, err := s.DeleteSession(bg, &savepointv1.DeleteSessionRequest{SessionId: "s1", Epoch: 4})
	if err != nil || del.GetTombstoneEpoch() != 5 {
		t.Errorf("DeleteSession = %v, %v", del, err)
	}
}

func TestServerReconcile(t *testing.T) {
	sent := &core.Effect{ToolUseID: "t1", Name: "send", Output: "ok"}
	f := &fakeStore{cp: core.Checkpoint{Revision: 9}, pending: []core.PendingToolUse{
		{ToolUse: core.ToolUse{ID: "t1", Name: "send"}, Begun: true, IdempotencyKey: "k1", Effect: sent},
		{ToolUse: core.ToolUse{ID: "t2", Name: "read", Class: core.ReadOnly}},
		{ToolUse: core.ToolUse{ID: "t3", Name: "pay", Class: core.Idempotent}, Begun: true, IdempotencyKey: "k3"},
		{ToolUse: core.ToolUse{ID: "t4", Name: "mail", BeginTracked: true}},
		{ToolUse: core.ToolUse{ID: "t5", Name: "mail", BeginTracked: true}, Begun: true, IdempotencyKey: "k5"},
	}}
	resp, err := NewServer(f, Options{}).Reconcile(bg, &savepointv1.ReconcileRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRevision() != 9 || len(resp.GetResolutions()) != 5 {
		t.Fatalf("Reconcile = %v", resp)
	}
	r := resp.GetResolutions()
	want := []savepointv1.Decision{
		savepointv1.Decision_DECISION_REUSE, savepointv1.Decision_DECISION_RUN, savepointv1.Decision_DECISION_RUN,
		savepointv1.Decision_DECISION_RUN, savepointv1.Decision_DECISION_IN_DOUBT,
	}
	for i, d := range want {
		if r[i].GetDecision() != d {
			t.Errorf("resolution %d = %v, want %v", i, r[i].GetDecision(), d)
		}
	}
	if r[0].GetEffect().GetOutput() != "ok" || !r[0].GetBegun() {
		t.Errorf("reuse resolution = %v", r[0])
	}
	if r[1].GetToolUse().GetEffectClass() != savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY || r[1].GetEffect() != nil {
		t.Errorf("read-only resolution = %v", r[1])
	}
	if r[2].GetIdempotencyKey() != "k3" {
		t.Errorf("idempotent resolution = %v", r[2])
	}
	if r[4].GetToolResultText() == "" || r[4].GetIdempotencyKey() != "k5" ||
		r[4].GetToolUse().GetEffectClass() != savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT {
		t.Errorf("in-doubt resolution = %v", r[4])
	}
}

// history returns n messages of about size bytes each.
func history(n, size int) []core.Message {
	var msgs []core.Message
	for i := range n {
		msgs = append(msgs, core.Message{Role: "user", ContentJSON: fmt.Sprintf("%q", fmt.Sprintf("%04d", i)+strings.Repeat("x", size))})
	}
	return msgs
}

// readAll pages through a checkpoint's history with ListMessages.
func readAll(t *testing.T, s *Server, first []*savepointv1.Message, token string, pageSize int32) []*savepointv1.Message {
	t.Helper()
	all := first
	for token != "" {
		resp, err := s.ListMessages(bg, &savepointv1.ListMessagesRequest{SessionId: "s", PageToken: token, PageSize: pageSize})
		if err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		if resp.GetFirstIndex() != uint64(len(all)) || resp.GetRevision() != 3 {
			t.Fatalf("page starts at %d of revision %d, want %d of 3", resp.GetFirstIndex(), resp.GetRevision(), len(all))
		}
		if len(resp.GetMessages()) == 0 {
			t.Fatal("empty page with a next token")
		}
		if pageSize > 0 && len(resp.GetMessages()) > int(pageSize) {
			t.Fatalf("page of %d messages, want at most %d", len(resp.GetMessages()), pageSize)
		}
		if n := proto.Size(resp); n > 4<<20 {
			t.Fatalf("page of %d bytes", n)
		}
		all = append(all, resp.GetMessages()...)
		token = resp.GetNextPageToken()
	}
	return all
}

func sameHistory(t *testing.T, got []*savepointv1.Message, want []core.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].GetRole() != want[i].Role || got[i].GetContentJson() != want[i].ContentJSON {
			t.Fatalf("message %d differs", i)
		}
	}
}

func TestServerPaging(t *testing.T) {
	msgs := history(40, 300<<10) // 12 MiB
	cp := core.Checkpoint{SessionID: "s", Revision: 3, Epoch: 1, MessageCount: 40, StateJSON: `"` + strings.Repeat("s", 900<<10) + `"`}
	s := NewServer(&fakeStore{cp: cp, msgs: msgs}, Options{})

	resume, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(resume); n > 3<<20 {
		t.Errorf("Resume response is %d bytes, over the 3 MiB budget", n)
	}
	if resume.GetEpoch() != 2 || resume.GetNextPageToken() == "" || len(resume.GetCheckpoint().GetMessages()) == 0 {
		t.Fatalf("Resume: epoch %d, %d messages, token %q", resume.GetEpoch(), len(resume.GetCheckpoint().GetMessages()), resume.GetNextPageToken())
	}
	sameHistory(t, readAll(t, s, resume.GetCheckpoint().GetMessages(), resume.GetNextPageToken(), 0), msgs)

	get, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s", Revision: proto.Uint64(3)})
	if err != nil {
		t.Fatal(err)
	}
	sameHistory(t, readAll(t, s, get.GetCheckpoint().GetMessages(), get.GetNextPageToken(), 3), msgs)

	// From an empty token, with the revision given or not.
	for _, rev := range []uint64{0, 3} {
		first, err := s.ListMessages(bg, &savepointv1.ListMessagesRequest{SessionId: "s", Revision: rev, PageSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.GetMessages()) != 7 || first.GetFirstIndex() != 0 {
			t.Fatalf("first page: %d messages from %d", len(first.GetMessages()), first.GetFirstIndex())
		}
		sameHistory(t, readAll(t, s, first.GetMessages(), first.GetNextPageToken(), 7), msgs)
	}
}

func TestServerPagingSmall(t *testing.T) {
	msgs := history(3, 10)
	s := NewServer(&fakeStore{cp: core.Checkpoint{SessionID: "s", Revision: 3, MessageCount: 3}, msgs: msgs}, Options{})
	get, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if get.GetNextPageToken() != "" || get.GetCheckpoint().GetMessageCount() != 3 {
		t.Errorf("GetSession: token %q, count %d", get.GetNextPageToken(), get.GetCheckpoint().GetMessageCount())
	}
	sameHistory(t, get.GetCheckpoint().GetMessages(), msgs)

	s = NewServer(&fakeStore{cp: core.Checkpoint{SessionID: "s", Revision: 3}}, Options{})
	get, err = s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil || get.GetNextPageToken() != "" || len(get.GetCheckpoint().GetMessages()) != 0 {
		t.Errorf("empty history: %v, %v", get, err)
	}
}

// TestServerFirstMessageOverBudget checks that a first message that does not
// fit beside the checkpoint is left to ListMessages.
func TestServerFirstMessageOverBudget(t *testing.T) {
	msgs := history(2, 2<<20-100)
	cp := core.Checkpoint{SessionID: "s", Revision: 3, MessageCount: 2, StateJSON: `"` + strings.Repeat("s", 1<<20) + `"`}
	s := NewServer(&fakeStore{cp: cp, msgs: msgs}, Options{})
	get, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(get.GetCheckpoint().GetMessages()) != 0 || get.GetNextPageToken() == "" {
		t.Fatalf("GetSession returned %d messages, token %q", len(get.GetCheckpoint().GetMessages()), get.GetNextPageToken())
	}
	sameHistory(t, readAll(t, s, nil, get.GetNextPageToken(), 0), msgs)
}

func TestServerListMessagesBadToken(t *testing.T) {
	s := NewServer(&fakeStore{cp: core.Checkpoint{SessionID: "s", Revision: 3, MessageCount: 5}, msgs: history(5, 1)}, Options{})
	tests := map[string]*savepointv1.ListMessagesRequest{
		"garbage":        {SessionId: "s", PageToken: "zzz"},
		"other session":  {SessionId: "s", PageToken: messagesToken("t", 3, 1).encode()},
		"other revision": {SessionId: "s", Revision: 2, PageToken: messagesToken("s", 3, 1).encode()},
		"past the end":   {SessionId: "s", PageToken: messagesToken("s", 3, 6).encode()},
		"sessions token": {SessionId: "s", PageToken: sessionsToken(sessionsQuery{}, "s").encode()},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.ListMessages(bg, req)
			wantStatus(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
		})
	}
	_, err := s.ListMessages(bg, &savepointv1.ListMessagesRequest{SessionId: "s", Revision: 2})
	wantStatus(t, err, codes.NotFound, "REVISION_NOT_FOUND")

	resp, err := s.ListMessages(bg, &savepointv1.ListMessagesRequest{SessionId: "s", PageToken: messagesToken("s", 3, 5).encode()})
	if err != nil || len(resp.GetMessages()) != 0 || resp.GetNextPageToken() != "" || resp.GetFirstIndex() != 5 {
		t.Errorf("token at the end: %v, %v", resp, err)
	}
}

func TestServerListSessions(t *testing.T) {
	f := &fakeStore{}
	for i := range 2500 {
		f.sessions = append(f.sessions, core.SessionSummary{SessionID: fmt.Sprintf("s%04d", i), Revision: 1, Labels: map[string]string{"team": "a"}})
	}
	s := NewServer(f, Options{})
	filter := map[string]string{"team": "a"}

	list := func(size int32, token string) *savepointv1.ListSessionsResponse {
		t.Helper()
		resp, err := s.ListSessions(bg, &savepointv1.ListSessionsRequest{PageSize: size, PageToken: token, LabelFilter: filter})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := list(0, ""); len(resp.GetSessions()) != 100 || f.limit != 101 || resp.GetNextPageToken() == "" {
		t.Errorf("default page: %d sessions, limit %d", len(resp.GetSessions()), f.limit)
	}
	resp := list(5000, "")
	if len(resp.GetSessions()) != 1000 || f.limit != 1001 {
		t.Errorf("clamped page: %d sessions, limit %d", len(resp.GetSessions()), f.limit)
	}
	var ids []string
	for token := ""; ; {
		resp := list(700, token)
		for _, sum := range resp.GetSessions() {
			ids = append(ids, sum.GetSessionId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(ids) != 2500 || ids[0] != "s0000" || ids[2499] != "s2499" {
		t.Errorf("paged through %d sessions", len(ids))
	}

	_, err := s.ListSessions(bg, &savepointv1.ListSessionsRequest{PageToken: resp.GetNextPageToken()})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
}

// TestServerListSessionsBudget checks that a page of large sessions stops at
// the response budget.
func TestServerListSessionsBudget(t *testing.T) {
	f := &fakeStore{}
	for i := range 100 {
		f.sessions = append(f.sessions, core.SessionSummary{SessionID: fmt.Sprintf("s%03d", i), Task: strings.Repeat("t", 64<<10)})
	}
	s := NewServer(f, Options{})
	var total int
	for token := ""; ; {
		resp, err := s.ListSessions(bg, &savepointv1.ListSessionsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if n := proto.Size(resp); n > 3<<20+64<<10 {
			t.Fatalf("page of %d bytes", n)
		}
		total += len(resp.GetSessions())
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if total != 100 {
		t.Errorf("paged through %d sessions, want 100", total)
	}
}

func TestServerListEffects(t *testing.T) {
	f := &fakeStore{}
	for i := range 1500 {
		f.ledger = append(f.ledger, core.LedgerEntry{ToolUseID: fmt.Sprintf("t%04d", i), Name: "x", Begun: true, IdempotencyKey: "k"})
	}
	f.ledger[3].Effect = &core.Effect{ToolUseID: "t0003", Output: "out", Late: true, RecordTime: time.Unix(1700000000, 0)}
	s := NewServer(f, Options{})
	list := func(size int32, token string) *savepointv1.ListEffectsResponse {
		t.Helper()
		resp, err := s.ListEffects(bg, &savepointv1.ListEffectsRequest{SessionId: "s", PageSize: size, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := list(0, ""); len(resp.GetEntries()) != 100 || f.limit != 101 || resp.GetNextPageToken() == "" {
		t.Errorf("default page: %d entries, limit %d", len(resp.GetEntries()), f.limit)
	} else if e := resp.GetEntries()[3]; !e.GetEffect().GetLate() || e.GetEffect().GetOutput() != "out" || !e.GetBegun() || e.GetIdempotencyKey() != "k" {
		t.Errorf("entry 3: %v", e)
	}
	if resp := list(5000, ""); len(resp.GetEntries()) != 1000 || f.limit != 1001 {
		t.Errorf("clamped page: %d entries, limit %d", len(resp.GetEntries()), f.limit)
	}
	var n int
	for token := ""; ; {
		resp := list(400, token)
		n += len(resp.GetEntries())
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if n != 1500 {
		t.Errorf("paged through %d entries, want 1500", n)
	}
	_, err := s.ListEffects(bg, &savepointv1.ListEffectsRequest{SessionId: "other", PageToken: list(1, "").GetNextPageToken()})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")

	// Large outputs: a page stops at the response budget, but holds one.
	f.ledger = nil
	for i := range 5 {
		f.ledger = append(f.ledger, core.LedgerEntry{ToolUseID: fmt.Sprintf("big%d", i), Effect: &core.Effect{Output: strings.Repeat("o", 2<<20)}})
	}
	var pages int
	for token := ""; ; pages++ {
		resp := list(0, token)
		if len(resp.GetEntries()) != 1 {
			t.Fatalf("page of %d 2 MiB entries", len(resp.GetEntries()))
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if pages != 4 {
		t.Errorf("%d pages after the first, want 4", pages)
	}
}

func TestServerListSessionsFilters(t *testing.T) {
	f := &fakeStore{sessions: []core.SessionSummary{{SessionID: "a", Status: core.StatusFailed}}}
	s := NewServer(f, Options{})
	before := time.Now()
	resp, err := s.ListSessions(bg, &savepointv1.ListSessionsRequest{
		StatusFilter: savepointv1.SessionStatus_SESSION_STATUS_FAILED, HasPendingToolUses: true, MinIdle: durationpb.New(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetSessions()[0].GetStatus(); got != savepointv1.SessionStatus_SESSION_STATUS_FAILED {
		t.Errorf("status %v", got)
	}
	if f.filter.Status != core.StatusFailed || !f.filter.HasPendingToolUses ||
		f.filter.UpdatedBefore.Before(before.Add(-time.Hour)) || f.filter.UpdatedBefore.After(time.Now().Add(-time.Hour)) {
		t.Errorf("store filter %+v", f.filter)
	}
}

func TestServerResumeReopen(t *testing.T) {
	f := &fakeStore{cp: core.Checkpoint{SessionID: "s", Revision: 1, Status: core.StatusCompleted, FinalOutput: "out", CompleteTime: time.Unix(1700000000, 0)}}
	s := NewServer(f, Options{})
	resp, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "s", Reopen: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.reopen {
		t.Error("reopen was not passed to the store")
	}
	cp := resp.GetCheckpoint()
	if cp.GetStatus() != savepointv1.SessionStatus_SESSION_STATUS_COMPLETED || cp.GetFinalOutput() != "out" || cp.GetCompleteTime().AsTime().Unix() != 1700000000 {
		t.Errorf("checkpoint %v", cp)
	}
}

// fakeBranch is a fakeStore whose fork answers with res.
type fakeBranch struct {
	fakeStore
	res core.BranchResult
}

func (f *fakeBranch) ForkSession(context.Context, *core.ForkRequest) (core.BranchResult, error) {
	return f.res, nil
}

// TestServerBranchListsFit checks that a fork's lists are cut to the
// response budget, large outputs first, and say so.
func TestServerBranchListsFit(t *testing.T) {
	f := &fakeBranch{}
	for i := range 3 {
		f.res.PerformedAfter = append(f.res.PerformedAfter, core.LedgerEntry{ToolUseID: fmt.Sprintf("p%d", i), Effect: &core.Effect{Output: strings.Repeat("é", 1<<20)}})
	}
	s := NewServer(f, Options{})
	resp, err := s.ForkSession(bg, &savepointv1.ForkSessionRequest{SourceSessionId: "a", NewSessionId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPerformedAfter()) != 3 || resp.GetListsTruncated() || proto.Size(resp) > 3<<20 {
		t.Fatalf("3 outputs of 2 MiB: %d entries, truncated %v, %d bytes", len(resp.GetPerformedAfter()), resp.GetListsTruncated(), proto.Size(resp))
	}
	for _, e := range resp.GetPerformedAfter() {
		if out := e.GetEffect().GetOutput(); !strings.HasSuffix(out, "…") || !utf8.ValidString(out) {
			t.Errorf("%s: output of %d bytes not cut on a rune", e.GetToolUseId(), len(out))
		}
	}
	f.res.PerformedAfter = nil
	for i := range 20000 {
		f.res.InDoubtAfter = append(f.res.InDoubtAfter, core.LedgerEntry{ToolUseID: fmt.Sprintf("%0500d", i), Begun: true})
	}
	resp, err = s.ForkSession(bg, &savepointv1.ForkSessionRequest{SourceSessionId: "a", NewSessionId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetInDoubtAfter()); !resp.GetListsTruncated() || n == 0 || n == 20000 || proto.Size(resp) > 3<<20 {
		t.Fatalf("20000 entries of 500-byte ids: %d kept, truncated %v, %d bytes", n, resp.GetListsTruncated(), proto.Size(resp))
	}
}

// TestServerSummaryTimes checks that a summary carries the session's create
// and update times, and leaves an unknown one unset.
func TestServerSummaryTimes(t *testing.T) {
	created, updated := time.Unix(1700000000, 1).UTC(), time.Unix(1700000100, 2).UTC()
	f := &fakeStore{sessions: []core.SessionSummary{
		{SessionID: "a", CreateTime: created, UpdateTime: updated},
		{SessionID: "b"}, // a damaged head: id only
	}}
	resp, err := NewServer(f, Options{}).ListSessions(bg, &savepointv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := resp.GetSessions()[0], resp.GetSessions()[1]
	if !a.GetCreateTime().AsTime().Equal(created) || !a.GetUpdateTime().AsTime().Equal(updated) {
		t.Errorf("a: create time %v, update time %v", a.GetCreateTime().AsTime(), a.GetUpdateTime().AsTime())
	}
	if b.GetCreateTime() != nil || b.GetUpdateTime() != nil {
		t.Errorf("b: create time %v, update time %v, want unset", b.GetCreateTime(), b.GetUpdateTime())
	}
}

// TestServerCheckpointCreateTime: GetSession's and Resume's checkpoint
// carries the session's create time, and leaves it unset when the store has
// none.
func TestServerCheckpointCreateTime(t *testing.T) {
	created := time.Unix(1700000000, 1).UTC()
	f := &fakeStore{cp: core.Checkpoint{SessionID: "s", Revision: 1, CreateTime: created}}
	s := NewServer(f, Options{})
	g, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.GetCheckpoint().GetCreateTime(); got == nil || !got.AsTime().Equal(created) {
		t.Errorf("GetSession: create time %v, want %v", got, created)
	}
	r, err := s.Resume(bg, &savepointv1.ResumeRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetCheckpoint().GetCreateTime(); got == nil || !got.AsTime().Equal(created) {
		t.Errorf("Resume: create time %v, want %v", got, created)
	}
	f.cp.CreateTime = time.Time{}
	if g, err := s.GetSession(bg, &savepointv1.GetSessionRequest{SessionId: "s"}); err != nil || g.GetCheckpoint().GetCreateTime() != nil {
		t.Errorf("GetSession without a create time: %v, %v; want it unset", g.GetCheckpoint().GetCreateTime(), err)
	}
}

// sizedStore is a fakeStore that says its size, counting the reads.
type sizedStore struct {
	fakeStore
	sizes int
}

func (s *sizedStore) Info() core.StoreInfo { return core.StoreInfo{Kind: "fake"} }

func (s *sizedStore) Size(context.Context) (int64, error) {
	s.sizes++
	return int64(100 * s.sizes), nil
}

// TestGetServerInfoSizeAge checks that GetServerInfo reads the store's size
// once for the calls of a core.SizeMaxAge, since reading it walks a
// directory or queries a catalog.
func TestGetServerInfoSizeAge(t *testing.T) {
	f := &sizedStore{}
	s := NewServer(f, Options{})
	for i := range 3 {
		resp, err := s.GetServerInfo(context.Background(), &savepointv1.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StoreBytes == nil || resp.GetStoreBytes() != 100 {
			t.Fatalf("call %d: store_bytes %v, want the first read's 100", i, resp.StoreBytes)
		}
	}
	if f.sizes != 1 {
		t.Fatalf("three calls read the size %d times, want once", f.sizes)
	}
}
