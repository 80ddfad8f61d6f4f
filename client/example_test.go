package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/savepoint-dev/savepoint/client"
)

// Reply is one model response, already split into the assistant message to
// save and the tool uses it names. A real provider client fills it in.
type Reply struct {
	Message  client.Message
	ToolUses []client.ToolUse
	Text     string // the final answer when there are no tool uses
	Tokens   uint64
}

// Model is the agent's model: anything that answers a history.
type Model interface {
	Create(ctx context.Context, messages []client.Message) (Reply, error)
}

// runTool runs the named tool. The effect class of each tool is declared
// where the tool uses are made (see classOf).
func runTool(ctx context.Context, call client.ToolUse, key string) (string, error) {
	switch call.Name {
	case "read_notes":
		b, err := os.ReadFile("sales-notes.txt")
		return string(b), err
	case "write_report":
		// key is the same on every attempt: pass it to an API that accepts
		// an idempotency key.
		return "Report written to report.txt", os.WriteFile("report.txt", []byte(call.InputJSON), 0o644)
	}
	return "", fmt.Errorf("unknown tool %q", call.Name)
}

// classOf says what each tool does to the world; the model's tool uses get
// their Class from it.
func classOf(name string) client.EffectClass {
	if name == "read_notes" || name == "count_words" {
		return client.ReadOnly
	}
	return client.SideEffect
}

// runAgent is the seed's runAgent on a Session: the same loop, with every
// turn checkpointed at Point A and Point B and every tool recorded in the
// ledger, and no bookkeeping.
func runAgent(ctx context.Context, c *client.Client, model Model, id, task string, resume bool) (string, error) {
	var s *client.Session
	var err error
	if resume {
		if s, err = c.Resume(ctx, id); err != nil {
			return "", err // client.ErrSessionNotFound: nothing to resume from
		}
		results, err := s.Reconcile(ctx, runTool)
		if err != nil {
			return "", err
		}
		if err := s.PointB(ctx, results); err != nil {
			return "", err
		}
	} else {
		prompt := client.Message{Role: "user", ContentJSON: fmt.Sprintf("%q", task)}
		s, err = c.Start(ctx, id, task, &client.StartOptions{Replace: true, Messages: []client.Message{prompt}})
		if err != nil {
			return "", err
		}
	}
	for s.Turn() < 20 {
		reply, err := model.Create(ctx, s.Messages())
		if err != nil {
			return "", err
		}
		s.AddTokens(reply.Tokens)
		if err := s.PointA(ctx, reply.Message, reply.ToolUses); err != nil {
			return "", err
		}
		if len(reply.ToolUses) == 0 {
			return reply.Text, nil
		}
		results, err := s.RunTools(ctx, reply.ToolUses, runTool)
		if err != nil {
			return "", err // the tool did not run: fenced, or the daemon is down
		}
		if err := s.PointB(ctx, results); err != nil {
			return "", err
		}
	}
	return "", errors.New("reached the turn limit")
}

// noModel stands in for a provider client.
type noModel struct{}

func (noModel) Create(context.Context, []client.Message) (Reply, error) {
	return Reply{}, errors.New("plug a model in")
}

// The agent loop of the seed, checkpointed by Savepoint; run it again with
// resume set after a crash.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "") // $SAVEPOINT_ADDR, else the default socket
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	resume := len(os.Args) > 1 && os.Args[1] == "--resume"
	result, err := runAgent(ctx, c, noModel{}, "sales-report", "Turn sales-notes.txt into a short report and write it to report.txt.", resume)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("[done]", result)
}

func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "unix:/run/user/1000/savepoint/savepoint.sock",
		client.WithWaitReady(), // fail now if the daemon is not running
		client.WithRetry(client.RetryPolicy{MaxAttempts: 8, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second}),
		client.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
	)
	if errors.Is(err, client.ErrUnavailable) {
		log.Fatal("savepointd is not running: start it with `make run`")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// After Resume, Reconcile says what became of each tool use that was
// pending when the agent died.
func ExampleSession_Reconcile() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Resume(ctx, "sales-report")
	if err != nil {
		log.Fatal(err)
	}
	pending := s.Pending()
	results, err := s.Reconcile(ctx, runTool)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		switch r.Decision {
		case client.DecisionReuse:
			fmt.Printf("%s %s: ledger hit, reusing result, not re-running\n", r.ToolUseID, pending[i].Name)
		case client.DecisionRun:
			fmt.Printf("%s %s: safe to run, ran it\n", r.ToolUseID, pending[i].Name)
		case client.DecisionInDoubt:
			fmt.Printf("%s %s: in doubt, appending is_error\n", r.ToolUseID, pending[i].Name)
		}
	}
	if err := s.PointB(ctx, results); err != nil {
		log.Fatal(err)
	}
}

// RunTool begins, runs and records one tool use; a failed record does not
// change the result, which is the tool's real outcome.
func ExampleSession_RunTool() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "", client.WithLedgerErrorHandler(func(call client.ToolUse, _ client.ToolResult, err error) {
		fmt.Fprintf(os.Stderr, "[ledger write failed] tool_use_id=%s: the side effect already happened, check by hand: %v\n", call.ToolUseID, err)
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Start(ctx, "one-tool", "write the report", nil)
	if err != nil {
		log.Fatal(err)
	}
	call := client.ToolUse{ToolUseID: "toolu_03", Name: "write_report", InputJSON: `{"text":"..."}`, EffectClass: classOf("write_report")}
	assistant := client.Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"toolu_03","name":"write_report","input":{"text":"..."}}]`}
	if err := s.PointA(ctx, assistant, []client.ToolUse{call}); err != nil {
		log.Fatal(err)
	}
	r := s.RunTool(ctx, call, func(ctx context.Context, key string) (string, error) {
		return runTool(ctx, call, key)
	})
	if r.Err != nil {
		log.Fatal(r.Err) // not run: errors.Is(r.Err, client.ErrSessionFenced) if another process resumed
	}
	if err := s.PointB(ctx, []client.ToolResult{r}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s (revision %d, %d messages)\n", r.ToolUseID, r.Content, s.Revision(), s.MessageCount())
	// Output:
	// toolu_03: Report written to report.txt (revision 3, 2 messages)
}

// An agent dies after write_report ran and was recorded, before Point B: the
// seed's demo. The next process resumes, and Reconcile reuses the recorded
// result instead of writing the report twice.
func ExampleClient_Resume() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	call := client.ToolUse{ToolUseID: "toolu_07", Name: "write_report", InputJSON: `{"text":"Q3"}`, EffectClass: client.SideEffect}
	first, err := c.Start(ctx, "killed-agent", "write the report", &client.StartOptions{Replace: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := first.PointA(ctx, client.Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"toolu_07","name":"write_report","input":{"text":"Q3"}}]`}, []client.ToolUse{call}); err != nil {
		log.Fatal(err)
	}
	writes := 0
	write := func(ctx context.Context, call client.ToolUse, key string) (string, error) {
		writes++
		return "Report written to report.txt", nil
	}
	first.RunTool(ctx, call, func(ctx context.Context, key string) (string, error) { return write(ctx, call, key) })
	// [kill]: the first process dies here, before Point B.

	s, err := c.Resume(ctx, "killed-agent")
	if err != nil {
		log.Fatal(err)
	}
	results, err := s.Reconcile(ctx, write)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%s: %v, %q\n", r.ToolUseID, r.Decision, r.Content)
	}
	if err := s.PointB(ctx, results); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("epoch %d, report written %d time(s)\n", s.Epoch(), writes)
	// Output:
	// toolu_07: DECISION_REUSE, "Report written to report.txt"
	// epoch 2, report written 1 time(s)
}

// Branch on the reason with errors.Is; errors.As gives the details.
func ExampleError() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Resume(ctx, "sales-report")
	if err != nil {
		log.Fatal(err)
	}
	err = s.Save(ctx, client.SaveOptions{Turn: new(uint32(3))})
	switch e, _ := errors.AsType[*client.Error](err); {
	case err == nil:
	case errors.Is(err, client.ErrSessionFenced):
		fmt.Printf("another process resumed the session (epoch %d): stopping\n", e.CurrentEpoch)
	case errors.Is(err, client.ErrRevisionMismatch):
		fmt.Printf("the session moved on to revision %d: resume it again\n", e.CurrentRevision)
	case errors.Is(err, client.ErrUnavailable):
		fmt.Println("savepointd is down; the save may be retried as is")
	default:
		log.Fatal(err)
	}
}

// Rewind the history to its first two messages, keeping the ledger.
func ExampleSession_Save() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Resume(ctx, "sales-report")
	if err != nil {
		log.Fatal(err)
	}
	err = s.Save(ctx, client.SaveOptions{
		KeepMessages: new(uint64(2)),
		Append:       []client.Message{{Role: "user", ContentJSON: `"Make it shorter."`}},
		Labels:       map[string]string{"branch": "short"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.MessageCount(), "messages at revision", s.Revision())
}
