package badgerstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// BenchmarkTurn is one agent turn with a side-effecting tool, the loop every
// client runs: Point A (one message, one pending tool use), BeginEffect,
// RecordEffect and Point B (the result): four durable writes per op, each
// with its own sync at one writer.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	rev := populate(b, s, "turn", 10)
	out := benchMessage(0).ContentJSON
	for turn := 0; b.Loop(); turn++ {
		id := fmt.Sprintf("toolu_%d", turn)
		a, err := s.SaveCheckpoint(ctx, &core.SaveRequest{
			SessionID: "turn", ExpectedRevision: rev, AppendMessages: []core.Message{benchMessage(turn)},
			PendingToolUses: []core.ToolUse{{ID: id, Name: "send_email", InputJSON: `{"n":1}`, BeginTracked: true}},
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "turn", ToolUseID: id, Epoch: a.Epoch}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.RecordEffect(ctx, "turn", core.Effect{ToolUseID: id, Name: "send_email", Output: out}); err != nil {
			b.Fatal(err)
		}
		res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{
			SessionID: "turn", ExpectedRevision: a.Revision, Epoch: a.Epoch,
			AppendMessages: []core.Message{{Role: "user", ContentJSON: out}},
		})
		if err != nil {
			b.Fatal(err)
		}
		rev = res.Revision
	}
}

// BenchmarkReads are the read paths a client takes on every resume and
// reconcile, on a session of 10,000 messages with one pending tool use: the
// latest checkpoint (GetSession), one page of 100 messages from the middle
// (ListMessages), and the pending tool uses with their ledger (Reconcile). None
// writes, so none syncs.
func BenchmarkReads(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	rev := populate(b, s, "reads", 10000)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{
		SessionID: "reads", ExpectedRevision: rev, AppendMessages: []core.Message{benchMessage(0)},
		PendingToolUses: []core.ToolUse{{ID: "toolu_1", Name: "send_email", InputJSON: `{"n":1}`, BeginTracked: true}},
	}); err != nil {
		b.Fatal(err)
	}
	b.Run("Checkpoint", func(b *testing.B) {
		for b.Loop() {
			cp, err := s.Checkpoint(ctx, "reads", 0)
			if err != nil || cp.MessageCount != 10001 {
				b.Fatalf("Checkpoint: %d messages, %v", cp.MessageCount, err)
			}
		}
	})
	b.Run("MessagesPage100", func(b *testing.B) {
		for b.Loop() {
			msgs, err := s.Messages(ctx, "reads", 0, 5000, 3<<20, 100)
			if err != nil || len(msgs) != 100 {
				b.Fatalf("Messages: %d, %v", len(msgs), err)
			}
		}
	})
	b.Run("PendingToolUses", func(b *testing.B) {
		for b.Loop() {
			_, calls, err := s.PendingToolUses(ctx, "reads")
			if err != nil || len(calls) != 1 {
				b.Fatalf("PendingToolUses: %d, %v", len(calls), err)
			}
		}
	})
}
