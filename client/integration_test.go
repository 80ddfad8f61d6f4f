package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// These tests drive the real server (in-process, on a Badger store and a
// Unix socket) through the client.

func startDaemon(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	return "unix:" + daemontest.StartInProcess(t, cfg).Socket
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(t.Context(), addr, append([]client.Option{client.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tools counts real runs, so a repeated side effect shows.
type tools struct{ runs map[string]int }

func (tl *tools) run(_ context.Context, call client.ToolUse, _ string) (string, error) {
	tl.runs[call.Name]++
	return call.Name + " done", nil
}

func assistantFor(calls ...client.ToolUse) client.Message {
	var blocks []string
	for _, c := range calls {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":{}}`, c.ToolUseID, c.Name))
	}
	return client.Message{Role: "assistant", ContentJSON: "[" + strings.Join(blocks, ",") + "]"}
}

func TestDaemonAgentLoop(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	c := dial(t, addr)
	tl := &tools{runs: map[string]int{}}
	ctx := t.Context()
	s, err := c.Start(ctx, "loop", "report", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	turns := [][]client.ToolUse{
		{{ToolUseID: "toolu_01", Name: "read_notes", EffectClass: client.ReadOnly}},
		{{ToolUseID: "toolu_02", Name: "count_words", EffectClass: client.ReadOnly}, {ToolUseID: "toolu_03", Name: "write_report", EffectClass: client.SideEffect}},
	}
	for _, calls := range turns {
		if err := s.PointA(ctx, assistantFor(calls...), calls); err != nil {
			t.Fatal(err)
		}
		results, err := s.RunTools(ctx, calls, tl.run)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PointB(ctx, results); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PointA(ctx, client.Message{Role: "assistant", ContentJSON: `[{"type":"text","text":"done"}]`}, nil); err != nil {
		t.Fatal(err)
	}
	if s.Turn() != 3 || s.MessageCount() != 6 || s.Revision() != 6 {
		t.Errorf("turn %d, %d messages, revision %d", s.Turn(), s.MessageCount(), s.Revision())
	}
	r, err := dial(t, addr).Resume(ctx, "loop")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Messages(), s.Messages()) || len(r.Pending()) != 0 {
		t.Errorf("resumed history differs:\n%v\n%v", r.Messages(), s.Messages())
	}
	if results, err := r.Reconcile(ctx, nil); err != nil || len(results) != 0 {
		t.Errorf("Reconcile with nothing pending: %v, %v", results, err)
	}
}

// The seed's crash moments, against the real daemon: a process dies at each
// point of one turn (runtime.Goexit stands in for the kill: nothing after it
// runs, not even RunTool's record), and a new one resumes and answers the
// pending call.
func TestDaemonCrashMoments(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	tests := []struct {
		name   string
		class  client.EffectClass
		moment string // where the first process died

		want     client.Decision // 0: nothing pending
		wantRuns int             // real runs of the tool in both processes
	}{
		{"side effect, after Point A (moment 1)", client.SideEffect, "after-save-a", client.DecisionRun, 1},
		{"side effect, after begin", client.SideEffect, "after-begin", client.DecisionInDoubt, 0},
		{"side effect, after the tool, before the record (moment 2)", client.SideEffect, "after-tool", client.DecisionInDoubt, 1},
		{"side effect, after the record", client.SideEffect, "after-effect-write", client.DecisionReuse, 1},
		{"side effect, after Point B (moment 3)", client.SideEffect, "after-save-b", 0, 1},
		{"read-only, after Point A", client.ReadOnly, "after-save-a", client.DecisionRun, 1},
		{"read-only, after the tool", client.ReadOnly, "after-tool", client.DecisionRun, 2},
		{"read-only, after the record", client.ReadOnly, "after-effect-write", client.DecisionReuse, 1},
		{"idempotent, after begin", client.Idempotent, "after-begin", client.DecisionRun, 1},
		{"idempotent, after the tool", client.Idempotent, "after-tool", client.DecisionRun, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			id := fmt.Sprintf("crash-%d", i)
			runs := 0
			var keys []string
			call := client.ToolUse{ToolUseID: "toolu_03", Name: "write_report", EffectClass: tt.class}
			died := func(at string) {
				if tt.moment == at {
					runtime.Goexit()
				}
			}

			first := make(chan struct{})
			go func() { // the first process
				defer close(first)
				c := dial(t, addr)
				s, err := c.Start(ctx, id, "report", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.PointA(ctx, assistantFor(call), []client.ToolUse{call}); err != nil {
					t.Error(err)
					return
				}
				died("after-save-a")
				r := s.RunTool(ctx, call, func(_ context.Context, key string) (string, error) {
					died("after-begin")
					runs++
					keys = append(keys, key)
					died("after-tool")
					return "written", nil
				})
				if r.Err != nil || r.LedgerErr != nil {
					t.Error(r)
					return
				}
				died("after-effect-write")
				if err := s.PointB(ctx, []client.ToolResult{r}); err != nil {
					t.Error(err)
				}
			}()
			<-first
			if t.Failed() {
				return
			}

			s, err := dial(t, addr).Resume(ctx, id) // the second process
			if err != nil {
				t.Fatal(err)
			}
			results, err := s.Reconcile(ctx, func(_ context.Context, _ client.ToolUse, key string) (string, error) {
				runs++
				keys = append(keys, key)
				return "written", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == 0 {
				if len(results) != 0 {
					t.Fatalf("results %+v, want none", results)
				}
			} else if len(results) != 1 || results[0].Decision != tt.want {
				t.Fatalf("results %+v, want %v", results, tt.want)
			} else if results[0].IsError != (tt.want == client.DecisionInDoubt) {
				t.Errorf("result %+v: is_error only when in doubt", results[0])
			}
			if err := s.PointB(ctx, results); err != nil {
				t.Fatal(err)
			}
			if runs != tt.wantRuns {
				t.Errorf("the tool ran %d times, want %d", runs, tt.wantRuns)
			}
			if tt.class == client.Idempotent && (len(keys) != tt.wantRuns || slices.Contains(keys, "") || len(slices.Compact(slices.Clone(keys))) != 1) {
				t.Errorf("idempotency keys %q: every run must get the key it was begun with", keys)
			}
			// Every tool use is answered exactly once.
			msgs := s.Messages()
			last := msgs[len(msgs)-1].ContentJSON
			if len(msgs) != 3 || strings.Count(last, `"tool_use_id":"toolu_03"`) != 1 || len(s.Pending()) != 0 {
				t.Errorf("history %v", msgs)
			}
		})
	}
}

func TestDaemonStartReplaceAndFencing(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	ctx := t.Context()
	c := dial(t, addr)
	old, err := c.Start(ctx, "s", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "s", "task", nil); !errors.Is(err, client.ErrSessionExists) {
		t.Fatalf("Start over a session: %v, want ErrSessionExists", err)
	}
	resumed, err := c.Resume(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	err = old.Save(ctx, client.SaveOptions{})
	e, _ := errors.AsType[*client.Error](err)
	if !errors.Is(err, client.ErrSessionFenced) || e == nil || e.Reason != "SESSION_FENCED" || e.CurrentEpoch != resumed.Epoch() {
		t.Fatalf("save by the old owner: %v, want ErrSessionFenced with the current epoch %d", err, resumed.Epoch())
	}
	if _, err := c.Start(ctx, "s", "task", nil); !errors.Is(err, client.ErrSessionExists) {
		t.Fatalf("Start over a resumed session: %v, want ErrSessionExists", err)
	}
	fresh, err := c.Start(ctx, "s", "task 2", &client.StartOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Revision() != 1 || fresh.Epoch() <= resumed.Epoch() {
		t.Errorf("replaced session at revision %d epoch %d", fresh.Revision(), fresh.Epoch())
	}
	for _, stale := range []*client.Session{old, resumed} {
		if err := stale.Save(ctx, client.SaveOptions{}); !errors.Is(err, client.ErrSessionFenced) {
			t.Errorf("save by a stale owner after the replace: %v, want ErrSessionFenced", err)
		}
	}
	if _, err := c.Start(ctx, "not a valid id!", "task", nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Start with a bad id: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.Resume(ctx, "missing"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("Resume of a missing session: %v, want ErrSessionNotFound", err)
	}
}

func TestDaemonPagedResume(t *testing.T) {
	addr := startDaemon(t, daemon.Config{ResponseBudgetBytes: 160 << 10, MaxStateBytes: 1 << 10, MaxMessageBytes: 16 << 10})
	ctx := t.Context()
	c := dial(t, addr)
	s, err := c.Start(ctx, "big", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	for batch := range 10 {
		var msgs []client.Message
		for i := range 20 {
			msgs = append(msgs, client.Message{Role: "user", ContentJSON: fmt.Sprintf(`"%d-%d %s"`, batch, i, strings.Repeat("x", 4000))})
		}
		if err := s.Save(ctx, client.SaveOptions{Append: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Raw().GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: "big"})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("GetSession: %v; want a first page only (%d messages)", err, len(first.GetCheckpoint().GetMessages()))
	}
	r, err := dial(t, addr).Resume(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if r.MessageCount() != 200 || !slices.Equal(r.Messages(), s.Messages()) {
		t.Errorf("resumed %d messages (count %d), want the 200 saved", len(r.Messages()), r.MessageCount())
	}
}

// The raw client shares the translation and retries.
func TestDaemonRawClient(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	_, err := c.Raw().Reconcile(t.Context(), &savepointv1.ReconcileRequest{SessionId: "nope"})
	if !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("raw Reconcile of a missing session: %v, want ErrSessionNotFound", err)
	}
}

// TestReconcileLargeOutputs resumes a session whose three recorded outputs
// together pass gRPC's default 4 MiB receive limit: Reconcile pages through
// them and reuses each.
func TestReconcileLargeOutputs(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	calls := []client.ToolUse{
		{ToolUseID: "t0", Name: "fetch", EffectClass: client.ReadOnly},
		{ToolUseID: "t1", Name: "fetch", EffectClass: client.ReadOnly},
		{ToolUseID: "t2", Name: "fetch", EffectClass: client.ReadOnly},
	}
	s, err := c.Start(t.Context(), "large", "fetch three pages", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PointA(t.Context(), assistantFor(calls...), calls); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("o", 1900<<10)
	for _, call := range calls {
		if r := s.RunTool(t.Context(), call, func(context.Context, string) (string, error) { return big, nil }); r.Err != nil || r.LedgerErr != nil {
			t.Fatalf("run %s: %v %v", call.ToolUseID, r.Err, r.LedgerErr)
		}
	}
	// The process dies before Point B; another resumes.
	r, err := c.Resume(t.Context(), "large")
	if err != nil {
		t.Fatal(err)
	}
	tl := &tools{runs: map[string]int{}}
	results, err := r.Reconcile(t.Context(), tl.run)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || tl.runs["fetch"] != 0 {
		t.Fatalf("%d results, %d runs", len(results), tl.runs["fetch"])
	}
	for i, res := range results {
		if res.ToolUseID != calls[i].ToolUseID || res.Decision != client.DecisionReuse || res.Content != big {
			t.Fatalf("result %d: %s %v %d bytes", i, res.ToolUseID, res.Decision, len(res.Content))
		}
	}
}

// TestDaemonRequestTooLarge: a save over the daemon's --max-request-bytes
// reaches the caller as ErrRequestTooLarge with both sizes, not as a bare
// gRPC error.
func TestDaemonRequestTooLarge(t *testing.T) {
	addr := startDaemon(t, daemon.Config{})
	c := dial(t, addr)
	big := &savepointv1.SaveCheckpointRequest{SessionId: "big", AppendMessages: []*savepointv1.Message{
		{Role: "user", ContentJson: `"` + strings.Repeat("x", 2<<20-2) + `"`},
		{Role: "user", ContentJson: `"` + strings.Repeat("x", 2<<20-2) + `"`},
	}}
	_, err := c.Raw().SaveCheckpoint(t.Context(), big)
	e, ok := errors.AsType[*client.Error](err)
	if !errors.Is(err, client.ErrRequestTooLarge) || !ok || e.Reason != "REQUEST_TOO_LARGE" {
		t.Fatalf("err = %v, want ErrRequestTooLarge", err)
	}
	if e.Metadata["max_request_bytes"] != fmt.Sprint(4<<20) || e.Metadata["request_bytes"] != fmt.Sprint(proto.Size(big)) {
		t.Errorf("metadata %v, want request_bytes %d and max_request_bytes %d", e.Metadata, proto.Size(big), 4<<20)
	}
	if _, err := c.Resume(t.Context(), "big"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("Resume after the refused save: %v, want ErrSessionNotFound", err)
	}
}

// TestDaemonComplete completes a session, finds Resume leaves it completed
// and unowned, and Reopen continues it.
func TestDaemonComplete(t *testing.T) {
	c := dial(t, startDaemon(t, daemon.Config{}))
	ctx := t.Context()
	s, err := c.Start(ctx, "job", "report", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status() != client.StatusActive {
		t.Errorf("new session status %v", s.Status())
	}
	if err := s.Complete(ctx, client.StatusCompleted, "the report"); err != nil {
		t.Fatal(err)
	}
	if s.Status() != client.StatusCompleted || s.FinalOutput() != "the report" {
		t.Errorf("after Complete: %v %q", s.Status(), s.FinalOutput())
	}
	if err := s.Complete(ctx, client.StatusCompleted, "the report"); err != nil {
		t.Errorf("the same completion again: %v", err)
	}
	if err := s.Complete(ctx, client.StatusFailed, "oops"); !errors.Is(err, client.ErrSessionCompleted) {
		t.Errorf("another completion: %v, want ErrSessionCompleted", err)
	}
	if err := s.Save(ctx, client.SaveOptions{Append: []client.Message{{Role: "user", ContentJSON: `"more"`}}}); !errors.Is(err, client.ErrSessionCompleted) {
		t.Errorf("save after Complete: %v, want ErrSessionCompleted", err)
	}

	r, err := c.Resume(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status() != client.StatusCompleted || r.FinalOutput() != "the report" || r.Epoch() != s.Epoch() || len(r.Messages()) != 1 {
		t.Errorf("resumed: status %v output %q epoch %d (was %d), %d messages", r.Status(), r.FinalOutput(), r.Epoch(), s.Epoch(), len(r.Messages()))
	}
	o, err := c.Reopen(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if o.Status() != client.StatusActive || o.Epoch() != s.Epoch()+1 || o.FinalOutput() != "" {
		t.Errorf("reopened: status %v epoch %d output %q", o.Status(), o.Epoch(), o.FinalOutput())
	}
	if err := o.Save(ctx, client.SaveOptions{Append: []client.Message{{Role: "user", ContentJSON: `"more"`}}}); err != nil {
		t.Errorf("save after Reopen: %v", err)
	}
	if err := s.Complete(ctx, client.StatusFailed, "stale"); !errors.Is(err, client.ErrSessionFenced) {
		t.Errorf("the old owner's Complete: %v, want ErrSessionFenced", err)
	}
	if err := o.Complete(ctx, client.StatusFailed, "gave up"); err != nil {
		t.Fatal(err)
	}

	// A completed session exists: Start refuses it, and replaces it when asked.
	if _, err := c.Start(ctx, "job", "again", nil); !errors.Is(err, client.ErrSessionExists) {
		t.Errorf("Start over a completed session: %v, want ErrSessionExists", err)
	}
	fresh, err := c.Start(ctx, "job", "again", &client.StartOptions{Replace: true})
	if err != nil {
		t.Fatalf("Start with Replace over a completed session: %v", err)
	}
	if fresh.Status() != client.StatusActive || fresh.Revision() != 1 || fresh.Task() != "again" {
		t.Errorf("replaced: status %v revision %d task %q", fresh.Status(), fresh.Revision(), fresh.Task())
	}
}
