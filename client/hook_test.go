package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// hookLog collects tool hook events, interleaved with the fake daemon's own
// event log, so a test sees each stage between the calls it follows.
type hookLog struct {
	f  *fake
	mu sync.Mutex
	ev []ToolEvent
}

func (h *hookLog) hook(ev ToolEvent) {
	h.mu.Lock()
	h.ev = append(h.ev, ev)
	h.mu.Unlock()
	e := "hook:" + string(ev.Stage) + ":" + ev.Call.ToolUseID
	if ev.Stage == StageDecided {
		e += fmt.Sprintf(":%v:begun=%v", ev.Decision, ev.Begun)
	}
	h.f.event(e)
}

func TestToolHookRunTool(t *testing.T) {
	down := status.Error(codes.Unavailable, "daemon down")
	tests := []struct {
		name      string
		class     EffectClass
		beginErr  error
		recordErr error
		want      []string
	}{
		{name: "side effect", class: SideEffect,
			want: []string{"begin:t1", "hook:begun:t1", "run:t1", "hook:ran:t1", "record:t1:false", "hook:recorded:t1"}},
		{name: "read-only: no begin, no begun stage", class: ReadOnly,
			want: []string{"run:t1", "hook:ran:t1", "record:t1:false", "hook:recorded:t1"}},
		{name: "failed begin: no stage at all", class: SideEffect, beginErr: down,
			want: []string{"begin:t1", "begin:t1", "begin:t1"}},
		{name: "failed record: no recorded stage", class: SideEffect, recordErr: down,
			want: []string{"begin:t1", "hook:begun:t1", "run:t1", "hook:ran:t1", "record:t1:false", "record:t1:false", "record:t1:false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := &hookLog{f: f}
			c := serve(t, f, WithToolHook(h.hook))
			call := ToolUse{ToolUseID: "t1", Name: "write_report", EffectClass: tt.class}
			s := startWithToolUse(t, c, call)
			f.mu.Lock()
			f.events = nil
			f.beginErr, f.recordErr = tt.beginErr, tt.recordErr
			f.mu.Unlock()
			s.RunTool(t.Context(), call, func(context.Context, string) (string, error) {
				f.event("run:t1")
				return "ok", nil
			})
			if got := f.eventLog(); !slices.Equal(got, tt.want) {
				t.Errorf("events\n got %v\nwant %v", got, tt.want)
			}
			for _, ev := range h.ev {
				if ev.SessionID != "s1" || ev.Call != call {
					t.Errorf("event %+v: want session s1 and call %+v", ev, call)
				}
				if ev.Stage != StageBegun && (ev.Result.Content != "ok" || ev.Result.ToolUseID != "t1") {
					t.Errorf("event %+v: want the tool's result", ev)
				}
			}
		})
	}
}

func TestToolHookReconcile(t *testing.T) {
	f := newFake()
	h := &hookLog{f: f}
	c := serve(t, f, WithToolHook(h.hook))
	s, err := c.Start(t.Context(), "s1", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := []ToolUse{
		{ToolUseID: "r1", Name: "read_notes", EffectClass: ReadOnly},
		{ToolUseID: "w1", Name: "write_report", EffectClass: SideEffect},
		{ToolUseID: "w2", Name: "send_mail", EffectClass: SideEffect},
	}
	if err := s.PointA(t.Context(), Message{Role: "assistant", ContentJSON: `[]`}, calls); err != nil {
		t.Fatal(err)
	}
	// w2 was begun before the crash; r1 and w1 never started.
	if _, err := c.Raw().BeginEffect(t.Context(), &savepointv1.BeginEffectRequest{SessionId: "s1", ToolUseId: "w2", Epoch: s.Epoch()}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.events = nil
	f.mu.Unlock()
	r, err := c.Resume(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), func(_ context.Context, call ToolUse, _ string) (string, error) {
		f.event("run:" + call.ToolUseID)
		return "ok", nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hook:decided:r1:DECISION_RUN:begun=false", "run:r1", "hook:ran:r1", "record:r1:false", "hook:recorded:r1",
		"hook:decided:w1:DECISION_RUN:begun=false", "begin:w1", "hook:begun:w1", "run:w1", "hook:ran:w1", "record:w1:false", "hook:recorded:w1",
		"hook:decided:w2:DECISION_IN_DOUBT:begun=true",
	}
	if got := f.eventLog(); !slices.Equal(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
}
