package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The seed's Level 2 bug is recording a placeholder in the ledger before the
// tool runs: a crash in between turns into a false "ledger hit" on resume.
// Through a Session the ledger is written only with what a tool returned:
// RunTool (and Reconcile, for a tool that must run) record fn's outcome after
// fn returns, and PointB re-records only a result its own RunTool produced.

func TestPointBRecordsOnlyWhatRan(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	call := ToolUse{ToolUseID: "t1", Name: "write_report", EffectClass: SideEffect}
	s := startWithToolUse(t, c, call)
	f.mu.Lock()
	f.events = nil
	f.mu.Unlock()

	// A placeholder made by hand, flagged as a ledger failure so that PointB
	// would try to record it: refused, nothing recorded, nothing saved.
	placeholder := ToolResult{ToolUseID: "t1", Content: "null", LedgerErr: errors.New("pretend")}
	if err := s.PointB(t.Context(), []ToolResult{placeholder}); !errors.Is(err, ErrNotRun) {
		t.Fatalf("PointB of a hand-made result with a ledger error: %v, want ErrNotRun", err)
	}
	if got := f.eventLog(); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
	if len(s.Pending()) != 1 {
		t.Errorf("pending %v after a refused PointB", s.Pending())
	}

	// The real result of a run whose record failed is recorded again.
	f.mu.Lock()
	f.recordErr = status.Error(codes.Internal, "store hiccup")
	f.mu.Unlock()
	r := s.RunTool(t.Context(), call, func(context.Context, string) (string, error) {
		if got := f.eventLog(); slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "record:") }) {
			t.Errorf("recorded before the tool ran: %v", got)
		}
		return "wrote it", nil
	})
	if r.LedgerErr == nil {
		t.Fatal("want a ledger error")
	}
	f.mu.Lock()
	f.recordErr = nil
	f.mu.Unlock()
	if err := s.PointB(t.Context(), []ToolResult{r}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.sessions["s1"].effects["t1"]; e == nil || e.GetOutput() != "wrote it" {
		t.Errorf("ledger has %v, want the tool's real output", e)
	}
}
