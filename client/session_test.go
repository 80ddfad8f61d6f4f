package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

var assistantMsg = Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"t1","name":"write_report","input":{}}]`}

func startWithToolUse(t *testing.T, c *Client, call ToolUse) *Session {
	t.Helper()
	s, err := c.Start(t.Context(), "s1", "write a report", &StartOptions{Messages: []Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(t.Context(), assistantMsg, []ToolUse{call}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveRetryReusesRequestID(t *testing.T) {
	call := ToolUse{ToolUseID: "t1", Name: "write_report"}
	tests := []struct {
		name    string
		prepare func(t *testing.T, c *Client) *Session
		op      func(ctx context.Context, s *Session) error
		wantRev uint64
	}{
		{"Start", func(*testing.T, *Client) *Session { return nil }, nil, 1},
		{"PointA", func(t *testing.T, c *Client) *Session {
			s, err := c.Start(t.Context(), "s1", "task", nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, func(ctx context.Context, s *Session) error { return s.PointA(ctx, assistantMsg, []ToolUse{call}) }, 2},
		{"PointB", func(t *testing.T, c *Client) *Session { return startWithToolUse(t, c, call) },
			func(ctx context.Context, s *Session) error {
				return s.PointB(ctx, []ToolResult{{ToolUseID: "t1", Content: "done"}})
			}, 3},
		{"Save", func(t *testing.T, c *Client) *Session { return startWithToolUse(t, c, call) },
			func(ctx context.Context, s *Session) error {
				return s.Save(ctx, SaveOptions{TokensUsed: new(uint64(42))})
			}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			c := serve(t, f)
			s := tt.prepare(t, c)
			f.mu.Lock()
			f.saveFailAfterApply = 1
			before := len(f.saves)
			f.mu.Unlock()
			var err error
			if tt.op == nil {
				s, err = c.Start(t.Context(), "s1", "task", nil)
			} else {
				err = tt.op(t.Context(), s)
			}
			if err != nil {
				t.Fatalf("the retried save failed: %v", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			saves := f.saves[before:]
			if len(saves) != 2 {
				t.Fatalf("the daemon saw %d saves, want the first and its retry", len(saves))
			}
			id := saves[0].GetRequestId()
			if _, err := uuid.Parse(id); err != nil {
				t.Errorf("request_id %q is not a UUID", id)
			}
			if saves[1].GetRequestId() != id {
				t.Errorf("the retry carried request_id %q, the first try %q", saves[1].GetRequestId(), id)
			}
			if got := f.sessions["s1"].revision; got != tt.wantRev || s.Revision() != tt.wantRev {
				t.Errorf("daemon at revision %d, session at %d; want %d (applied once)", got, s.Revision(), tt.wantRev)
			}
		})
	}
}

// unknownPointA starts session s1 on a fake daemon, without retries, and
// makes its first PointA (of calls) fail after the fake applied it: an
// outcome unknown to the Session.
func unknownPointA(t *testing.T) (*fake, *Session, []ToolUse) {
	t.Helper()
	f := newFake()
	c := serve(t, f, WithRetry(RetryPolicy{MaxAttempts: 1}))
	s, err := c.Start(t.Context(), "s1", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.saveFailAfterApply = 1
	f.mu.Unlock()
	calls := []ToolUse{{ToolUseID: "t1", Name: "read_notes", EffectClass: ReadOnly}}
	if err := s.PointA(t.Context(), assistantMsg, calls); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PointA: %v, want ErrUnavailable", err)
	}
	return f, s, calls
}

// A save whose outcome is unknown after all retries keeps its request_id
// when the caller tries the same save again, so it is still applied once.
func TestSaveRetryAcrossCalls(t *testing.T) {
	f, s, calls := unknownPointA(t)
	if s.Revision() != 1 || len(s.Pending()) != 0 {
		t.Fatalf("a failed save changed the session: revision %d, pending %v", s.Revision(), s.Pending())
	}
	if err := s.PointA(t.Context(), assistantMsg, calls); err != nil {
		t.Fatalf("PointA again: %v", err)
	}
	if err := s.Save(t.Context(), SaveOptions{TokensUsed: new(uint64(5))}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := []string{}
	for _, r := range f.saves {
		ids = append(ids, r.GetRequestId())
	}
	if len(ids) != 4 || ids[1] != ids[2] || ids[0] == ids[1] || ids[3] == ids[2] {
		t.Errorf("request ids %v: want the repeated PointA to reuse its id and other saves to get new ones", ids)
	}
	if got := f.sessions["s1"].revision; got != 3 || s.Revision() != 3 {
		t.Errorf("daemon at revision %d, session at %d; want 3", got, s.Revision())
	}
}

func TestRunTool(t *testing.T) {
	fenced := infoErr(codes.Aborted, "SESSION_FENCED", nil)
	down := status.Error(codes.Unavailable, "daemon down")
	tests := []struct {
		name      string
		class     EffectClass
		call      ToolUse // zero: the pending call
		beginErr  error
		recordErr error
		toolErr   error

		wantEvents    []string
		wantKey       string
		wantErr       error // r.Err: the tool did not run
		wantLedgerErr error
		wantContent   string
		wantIsError   bool
	}{
		{name: "side effect: begin, run, record", class: SideEffect,
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:false"}, wantKey: "key-1", wantContent: "ok"},
		{name: "unspecified counts as side effect", class: 0,
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:false"}, wantKey: "key-1", wantContent: "ok"},
		{name: "idempotent gets the begin key", class: Idempotent,
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:false"}, wantKey: "key-1", wantContent: "ok"},
		{name: "read-only needs no begin", class: ReadOnly,
			wantEvents: []string{"run:t1", "record:t1:false"}, wantContent: "ok"},
		{name: "a failed tool is recorded too", class: SideEffect, toolErr: errors.New("disk on fire"),
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:true"}, wantKey: "key-1", wantContent: "disk on fire", wantIsError: true},
		{name: "fenced begin: the tool does not run", class: SideEffect, beginErr: fenced,
			wantEvents: []string{"begin:t1"}, wantErr: ErrSessionFenced},
		{name: "daemon down at begin: retried, then not run", class: SideEffect, beginErr: down,
			wantEvents: []string{"begin:t1", "begin:t1", "begin:t1"}, wantErr: ErrUnavailable},
		{name: "record fails: the real result stands", class: SideEffect, recordErr: down,
			wantEvents:    []string{"begin:t1", "run:t1", "record:t1:false", "record:t1:false", "record:t1:false"},
			wantKey:       "key-1",
			wantLedgerErr: ErrUnavailable, wantContent: "ok"},
		{name: "record conflict on a failed tool: still its real failure", class: SideEffect, toolErr: errors.New("boom"),
			recordErr:     infoErr(codes.AlreadyExists, "EFFECT_CONFLICT", nil),
			wantEvents:    []string{"begin:t1", "run:t1", "record:t1:true"},
			wantKey:       "key-1",
			wantLedgerErr: ErrEffectConflict, wantContent: "boom", wantIsError: true},
		{name: "not pending: not run", class: SideEffect, call: ToolUse{ToolUseID: "t9", Name: "write_report"},
			wantErr: ErrCallNotPending},
		{name: "other name: not run", class: SideEffect, call: ToolUse{ToolUseID: "t1", Name: "rm_rf"},
			wantErr: ErrToolNameMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			var ledgerCalls []ToolResult
			c := serve(t, f, WithLedgerErrorHandler(func(call ToolUse, r ToolResult, err error) {
				ledgerCalls = append(ledgerCalls, r)
			}))
			pending := ToolUse{ToolUseID: "t1", Name: "write_report", EffectClass: tt.class}
			s := startWithToolUse(t, c, pending)
			f.mu.Lock()
			f.beginErr, f.recordErr = tt.beginErr, tt.recordErr
			f.mu.Unlock()
			call := tt.call
			if call.ToolUseID == "" {
				call = pending
			}
			var gotKey string
			r := s.RunTool(t.Context(), call, func(ctx context.Context, key string) (string, error) {
				f.event("run:" + call.ToolUseID)
				gotKey = key
				if tt.toolErr != nil {
					return "partial", tt.toolErr
				}
				return "ok", nil
			})
			if got := f.eventLog(); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
			if gotKey != tt.wantKey {
				t.Errorf("key %q, want %q", gotKey, tt.wantKey)
			}
			if r.ToolUseID != call.ToolUseID {
				t.Errorf("ToolUseID %q", r.ToolUseID)
			}
			if tt.wantErr != nil {
				if !errors.Is(r.Err, tt.wantErr) || r.Content != "" {
					t.Errorf("got %+v, want Err %v and no content", r, tt.wantErr)
				}
				if err := s.PointB(t.Context(), []ToolResult{r}); err == nil {
					t.Error("PointB accepted the result of a tool that did not run")
				}
				return
			}
			if r.Err != nil || r.Content != tt.wantContent || r.IsError != tt.wantIsError {
				t.Errorf("got %+v, want content %q is_error %v", r, tt.wantContent, tt.wantIsError)
			}
			if tt.wantLedgerErr == nil {
				if r.LedgerErr != nil || len(ledgerCalls) != 0 {
					t.Errorf("ledger error %v reported %d times, want none", r.LedgerErr, len(ledgerCalls))
				}
			} else {
				if !errors.Is(r.LedgerErr, tt.wantLedgerErr) || len(ledgerCalls) != 1 || ledgerCalls[0].Content != tt.wantContent {
					t.Errorf("ledger error %v reported %d times, want %v once", r.LedgerErr, len(ledgerCalls), tt.wantLedgerErr)
				}
			}
			// A tool use runs at most once per session.
			again := s.RunTool(t.Context(), call, func(context.Context, string) (string, error) {
				t.Error("a tool use ran twice")
				return "", nil
			})
			if !errors.Is(again.Err, ErrAlreadyRun) {
				t.Errorf("second RunTool: %v, want ErrAlreadyRun", again.Err)
			}
			f.mu.Lock()
			f.recordErr = nil
			f.mu.Unlock()
			if err := s.PointB(t.Context(), []ToolResult{r}); err != nil {
				t.Fatalf("PointB: %v", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			e := f.sessions["s1"].effects["t1"]
			if e == nil || e.GetOutput() != tt.wantContent || e.GetIsError() != tt.wantIsError {
				if tt.recordErr == nil || status.Code(tt.recordErr) == codes.Unavailable {
					t.Errorf("ledger after PointB: %v, want the real outcome (PointB records a missed one)", e)
				}
			}
			if len(f.sessions["s1"].pending) != 0 {
				t.Error("PointB left tool uses pending")
			}
		})
	}
}

// A begin that failed leaves the tool use runnable: nothing ran.
func TestRunToolAfterFailedBegin(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	call := ToolUse{ToolUseID: "t1", Name: "write_report"}
	s := startWithToolUse(t, c, call)
	f.beginErr = status.Error(codes.Unavailable, "down")
	run := func(context.Context, string) (string, error) { f.event("run:t1"); return "ok", nil }
	if r := s.RunTool(t.Context(), call, run); !errors.Is(r.Err, ErrUnavailable) {
		t.Fatalf("got %+v", r)
	}
	f.mu.Lock()
	f.beginErr = nil
	f.mu.Unlock()
	if r := s.RunTool(t.Context(), call, run); r.Err != nil || r.Content != "ok" {
		t.Fatalf("got %+v", r)
	}
	if n := slices.Index(f.eventLog(), "run:t1"); n < 0 || slices.Contains(f.eventLog()[n+1:], "run:t1") {
		t.Errorf("events %v: want exactly one run", f.eventLog())
	}
}

func TestReconcile(t *testing.T) {
	type crash int
	const (
		afterSaveA  crash = iota // Point A saved, nothing begun (seed moment 1)
		afterBegin               // begun, outcome unknown (seed moment 2)
		afterRecord              // recorded, Point B not saved
	)
	tests := []struct {
		name   string
		class  EffectClass
		crash  crash
		failed bool // the tool failed (for afterRecord)

		wantDecision Decision
		wantRun      bool
		wantKey      string
		wantContent  string
		wantIsError  bool
		wantEvents   []string // after the resume
	}{
		{name: "recorded: reuse, not run", class: SideEffect, crash: afterRecord,
			wantDecision: DecisionReuse, wantContent: "ran before the crash"},
		{name: "recorded failure: reuse it", class: SideEffect, crash: afterRecord, failed: true,
			wantDecision: DecisionReuse, wantContent: "failed before the crash", wantIsError: true},
		{name: "read-only not recorded: run again", class: ReadOnly, crash: afterSaveA,
			wantDecision: DecisionRun, wantRun: true, wantContent: "ran on resume",
			wantEvents: []string{"run:t1", "record:t1:false"}},
		{name: "side effect never begun: run, begun first", class: SideEffect, crash: afterSaveA,
			wantDecision: DecisionRun, wantRun: true, wantKey: "key-1", wantContent: "ran on resume",
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:false"}},
		{name: "side effect begun: in doubt", class: SideEffect, crash: afterBegin,
			wantDecision: DecisionInDoubt, wantContent: "outcome of write_report unknown", wantIsError: true},
		{name: "idempotent begun: run with the same key", class: Idempotent, crash: afterBegin,
			wantDecision: DecisionRun, wantRun: true, wantKey: "key-1", wantContent: "ran on resume",
			wantEvents: []string{"begin:t1", "run:t1", "record:t1:false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			c := serve(t, f)
			call := ToolUse{ToolUseID: "t1", Name: "write_report", InputJSON: `{"path":"report.txt"}`, EffectClass: tt.class}
			old := startWithToolUse(t, c, call)
			switch tt.crash {
			case afterBegin:
				if _, err := c.Raw().BeginEffect(t.Context(), &savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "t1", Epoch: old.Epoch()}); err != nil {
					t.Fatal(err)
				}
			case afterRecord:
				r := old.RunTool(t.Context(), call, func(context.Context, string) (string, error) {
					if tt.failed {
						return "", errors.New("failed before the crash")
					}
					return "ran before the crash", nil
				})
				if r.Err != nil || r.LedgerErr != nil {
					t.Fatal(r)
				}
			}
			f.mu.Lock()
			f.events = nil
			f.mu.Unlock()

			s, err := c.Resume(t.Context(), "s1")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Pending(); len(got) != 1 || got[0] != call {
				t.Fatalf("resumed pending %v, want %v", got, call)
			}
			var ran bool
			var gotKey string
			results, err := s.Reconcile(t.Context(), func(ctx context.Context, got ToolUse, key string) (string, error) {
				f.event("run:" + got.ToolUseID)
				if got != call {
					t.Errorf("run got %+v, want %+v", got, call)
				}
				ran, gotKey = true, key
				return "ran on resume", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 {
				t.Fatalf("%d results", len(results))
			}
			r := results[0]
			if r.Decision != tt.wantDecision || r.ToolUseID != "t1" || r.Content != tt.wantContent || r.IsError != tt.wantIsError || r.Err != nil {
				t.Errorf("got %+v, want %v %q is_error=%v", r, tt.wantDecision, tt.wantContent, tt.wantIsError)
			}
			if ran != tt.wantRun || gotKey != tt.wantKey {
				t.Errorf("ran %v with key %q, want %v with %q", ran, gotKey, tt.wantRun, tt.wantKey)
			}
			if got := f.eventLog(); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
			if err := s.PointB(t.Context(), results); err != nil {
				t.Fatal(err)
			}
			msgs := s.Messages()
			want, _ := AnthropicToolResults([]ToolResult{r})
			if len(msgs) != 3 || msgs[1] != assistantMsg || msgs[2] != want[0] || s.MessageCount() != 3 {
				t.Errorf("history %v", msgs)
			}
			// The process that crashed is fenced now.
			if err := old.Save(t.Context(), SaveOptions{}); !errors.Is(err, ErrSessionFenced) {
				t.Errorf("save by the old owner: %v, want ErrSessionFenced", err)
			}
		})
	}
}

func TestReconcileFencedDoesNotRun(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	startWithToolUse(t, c, ToolUse{ToolUseID: "t1", Name: "write_report", EffectClass: SideEffect})
	s, err := c.Resume(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(t.Context(), "s1"); err != nil { // another process takes over
		t.Fatal(err)
	}
	_, err = s.Reconcile(t.Context(), func(context.Context, ToolUse, string) (string, error) {
		t.Error("a fenced session ran a tool")
		return "", nil
	})
	if !errors.Is(err, ErrSessionFenced) {
		t.Fatalf("Reconcile: %v, want ErrSessionFenced", err)
	}
	if _, err := s.Reconcile(t.Context(), nil); err == nil {
		t.Fatal("Reconcile with a tool use to run and no run function succeeded")
	}
}

func TestResumeLoadsWholeHistory(t *testing.T) {
	for _, pageSize := range []int{0, 1, 2, 3, 7, 8} {
		t.Run(fmt.Sprint("page size ", pageSize), func(t *testing.T) {
			f := newFake()
			f.pageSize = pageSize
			c := serve(t, f)
			var initial []Message
			for i := range 6 {
				initial = append(initial, Message{Role: "user", ContentJSON: fmt.Sprintf(`"m%d"`, i)})
			}
			s, err := c.Start(t.Context(), "s1", "task", &StartOptions{Messages: initial, StateJSON: `{"k":1}`, Labels: map[string]string{"a": "b"}})
			if err != nil {
				t.Fatal(err)
			}
			call := ToolUse{ToolUseID: "t1", Name: "read_notes", EffectClass: ReadOnly}
			if err := s.PointA(t.Context(), assistantMsg, []ToolUse{call}); err != nil {
				t.Fatal(err)
			}
			s.AddTokens(100)
			if err := s.Save(t.Context(), SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			r, err := c.Resume(t.Context(), "s1")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Messages(), s.Messages()) || r.MessageCount() != 7 || len(r.Messages()) != 7 {
				t.Errorf("resumed history %v, want %v", r.Messages(), s.Messages())
			}
			if r.Revision() != 3 || r.Epoch() != 2 || r.Turn() != 1 || r.TokensUsed() != 100 || r.Task() != "task" ||
				r.StateJSON() != `{"k":1}` || r.Labels()["a"] != "b" || !slices.Equal(r.Pending(), []ToolUse{call}) {
				t.Errorf("resumed rev %d epoch %d turn %d tokens %d task %q state %q labels %v pending %v",
					r.Revision(), r.Epoch(), r.Turn(), r.TokensUsed(), r.Task(), r.StateJSON(), r.Labels(), r.Pending())
			}
		})
	}
	if _, err := serve(t, newFake()).Resume(t.Context(), "nope"); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("Resume of a missing session: %v, want ErrSessionNotFound", err)
	}
}

func TestPointBChecksResults(t *testing.T) {
	ok := func(id string) ToolResult { return ToolResult{ToolUseID: id, Content: "ok"} }
	tests := []struct {
		name    string
		results []ToolResult
		wantErr error
	}{
		{"all answered, any order", []ToolResult{ok("t2"), ok("t1")}, nil},
		{"one missing", []ToolResult{ok("t1")}, ErrResultsMismatch},
		{"none", nil, ErrResultsMismatch},
		{"answered twice", []ToolResult{ok("t1"), ok("t1"), ok("t2")}, ErrResultsMismatch},
		{"unknown id", []ToolResult{ok("t1"), ok("t2"), ok("t3")}, ErrResultsMismatch},
		{"not run", []ToolResult{ok("t1"), {ToolUseID: "t2", Err: fmt.Errorf("not run: %w", ErrSessionFenced)}}, ErrSessionFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, newFake())
			s, err := c.Start(t.Context(), "s1", "task", nil)
			if err != nil {
				t.Fatal(err)
			}
			calls := []ToolUse{{ToolUseID: "t1", Name: "a", EffectClass: ReadOnly}, {ToolUseID: "t2", Name: "b", EffectClass: ReadOnly}}
			if err := s.PointA(t.Context(), assistantMsg, calls); err != nil {
				t.Fatal(err)
			}
			err = s.PointB(t.Context(), tt.results)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("PointB: %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if len(s.Pending()) != 2 || s.Revision() != 2 {
					t.Error("a refused PointB changed the session")
				}
				return
			}
			want, _ := AnthropicToolResults([]ToolResult{ok("t1"), ok("t2")})
			if got := s.Messages(); got[len(got)-1] != want[0] || len(s.Pending()) != 0 {
				t.Errorf("appended %v, want %v in the order named", got[len(got)-1], want[0])
			}
			if err := s.PointB(t.Context(), nil); err != nil || s.Revision() != 3 {
				t.Errorf("PointB with nothing pending: %v at revision %d, want a no-op", err, s.Revision())
			}
		})
	}
}

func TestPendingGuards(t *testing.T) {
	c := serve(t, newFake())
	s := startWithToolUse(t, c, ToolUse{ToolUseID: "t1", Name: "write_report"})
	tests := []struct {
		name string
		op   func() error
	}{
		{"PointA", func() error { return s.PointA(t.Context(), assistantMsg, nil) }},
		{"Save appending", func() error { return s.Save(t.Context(), SaveOptions{Append: []Message{assistantMsg}}) }},
		{"Save rewinding", func() error { return s.Save(t.Context(), SaveOptions{KeepMessages: new(uint64(1))}) }},
	}
	for _, tt := range tests {
		if err := tt.op(); !errors.Is(err, ErrToolUsesPending) {
			t.Errorf("%s while a tool use is pending: %v, want ErrToolUsesPending", tt.name, err)
		}
	}
	if err := s.Save(t.Context(), SaveOptions{Turn: new(uint32(9))}); err != nil || s.Turn() != 9 || len(s.Pending()) != 1 {
		t.Errorf("Save of the turn while pending: %v, turn %d, pending %v", err, s.Turn(), s.Pending())
	}
}

func TestSaveOptions(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	s, err := c.Start(t.Context(), "s1", "task", &StartOptions{Labels: map[string]string{"team": "a"}, StateJSON: `{"x":1}`})
	if err != nil {
		t.Fatal(err)
	}
	m := func(i int) Message { return Message{Role: "user", ContentJSON: fmt.Sprint(i)} }
	if err := s.Save(t.Context(), SaveOptions{Append: []Message{m(1), m(2), m(3)}, Task: new("task 2")}); err != nil {
		t.Fatal(err)
	}
	// Rewind to the first message and branch.
	if err := s.Save(t.Context(), SaveOptions{KeepMessages: new(uint64(1)), Append: []Message{m(4)}, StateJSON: new(""), Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Messages(); !slices.Equal(got, []Message{m(1), m(4)}) || s.MessageCount() != 2 {
		t.Errorf("history %v", got)
	}
	fs := f.sessions["s1"]
	if fs.task != "task 2" || fs.state != "" || len(fs.labels) != 0 || len(fs.messages) != 2 || s.Task() != "task 2" {
		t.Errorf("daemon has task %q state %q labels %v", fs.task, fs.state, fs.labels)
	}
	if err := s.Save(t.Context(), SaveOptions{KeepMessages: new(uint64(5))}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("keeping more messages than stored: %v, want ErrInvalidArgument", err)
	}
	if len(s.Messages()) != 2 {
		t.Error("a refused save changed the history")
	}
}

func TestStart(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	first, err := c.Start(t.Context(), "s1", "task", nil)
	if err != nil || first.Revision() != 1 || first.Epoch() != 1 || first.Turn() != 0 {
		t.Fatalf("Start: %v", err)
	}
	if _, err := c.Start(t.Context(), "s1", "task", nil); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("Start over an existing session: %v, want ErrSessionExists", err)
	}
	if _, err := c.Resume(t.Context(), "s1"); err != nil {
		t.Fatal(err)
	}
	// Once resumed, the daemon fences a create's epoch 0 before it sees the
	// session exists: Start still reports ErrSessionExists.
	if _, err := c.Start(t.Context(), "s1", "task", nil); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("Start over a resumed session: %v, want ErrSessionExists", err)
	}
	fresh, err := c.Start(t.Context(), "s1", "new task", &StartOptions{Replace: true})
	if err != nil {
		t.Fatalf("Start with Replace: %v", err)
	}
	if fresh.Revision() != 1 || fresh.Epoch() <= 2 || len(fresh.Messages()) != 0 || fresh.Task() != "new task" {
		t.Errorf("replaced session at revision %d epoch %d", fresh.Revision(), fresh.Epoch())
	}
	if err := first.Save(t.Context(), SaveOptions{}); !errors.Is(err, ErrSessionFenced) {
		t.Errorf("the replaced session's old owner saved: %v, want ErrSessionFenced", err)
	}
	if _, err := c.Start(t.Context(), "s2", "task", &StartOptions{Replace: true}); err != nil {
		t.Errorf("Start with Replace and nothing to replace: %v", err)
	}
	if err := fresh.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(t.Context(), "s1"); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("Resume after Delete: %v, want ErrSessionNotFound", err)
	}
}

// RunTool may run the tools of one turn concurrently.
func TestRunToolConcurrent(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	s, err := c.Start(t.Context(), "s1", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls []ToolUse
	for i := range 8 {
		calls = append(calls, ToolUse{ToolUseID: fmt.Sprint("t", i), Name: "tool", EffectClass: EffectClass(i%3 + 1)})
	}
	if err := s.PointA(t.Context(), assistantMsg, calls); err != nil {
		t.Fatal(err)
	}
	results := make([]ToolResult, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() {
			results[i] = s.RunTool(t.Context(), call, func(context.Context, string) (string, error) { return call.ToolUseID, nil })
		})
	}
	wg.Wait()
	if err := s.PointB(t.Context(), results); err != nil {
		t.Fatal(err)
	}
	if n := len(f.sessions["s1"].effects); n != len(calls) {
		t.Errorf("%d effects recorded, want %d", n, len(calls))
	}
}

func TestAnthropicToolResults(t *testing.T) {
	msgs, err := AnthropicToolResults([]ToolResult{
		{ToolUseID: "toolu_01", Content: "3 <notes> & more"},
		{ToolUseID: "toolu_02", Content: "unknown", IsError: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"tool_result","tool_use_id":"toolu_01","content":"3 <notes> & more"},` +
		`{"type":"tool_result","tool_use_id":"toolu_02","content":"unknown","is_error":true}]`
	if len(msgs) != 1 || msgs[0].Role != "user" || msgs[0].ContentJSON != want {
		t.Errorf("got %+v\nwant %s", msgs, want)
	}
	if msgs, err := AnthropicToolResults(nil); err != nil || len(msgs) != 0 {
		t.Errorf("no results: %v, %v", msgs, err)
	}
}

func TestCustomToolResults(t *testing.T) {
	c := serve(t, newFake(), WithToolResults(func(rs []ToolResult) ([]Message, error) {
		var out []Message
		for _, r := range rs {
			out = append(out, Message{Role: "tool", ContentJSON: fmt.Sprintf(`{"id":%q,"out":%q}`, r.ToolUseID, r.Content)})
		}
		return out, nil
	}))
	s := startWithToolUse(t, c, ToolUse{ToolUseID: "t1", Name: "write_report"})
	r := s.RunTool(t.Context(), ToolUse{ToolUseID: "t1", Name: "write_report"}, func(context.Context, string) (string, error) { return "x", nil })
	if err := s.PointB(t.Context(), []ToolResult{r}); err != nil {
		t.Fatal(err)
	}
	got := s.Messages()
	if last := got[len(got)-1]; last.Role != "tool" || last.ContentJSON != `{"id":"t1","out":"x"}` {
		t.Errorf("appended %+v", last)
	}
}
