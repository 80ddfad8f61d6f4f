package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestPostgresLifecycle runs the session lifecycle RPCs over gRPC on two
// savepointd sharing one PostgreSQL database: the ledger written on A is
// listed on B, a fork made on B reports what A's session performed after
// the fork point, a completion on B is seen by A's ListSessions filters and
// Resume, and a rewind on A reports the same effects.
func TestPostgresLifecycle(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	bin := daemontest.Binary(t)
	a := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	b := daemontest.StartBinary(t, bin, "--store-url", srv.TCPURL(db, "default_query_exec_mode=simple_protocol"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	_, err := a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", Task: "t",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"go"`}}})
	must("create on A", err)
	_, err = a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 1,
		AppendMessages:  []*savepointv1.Message{{Role: "assistant", ContentJson: `"sending"`}},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "w1", Name: "send", BeginTracked: true}}})
	must("Point A on A", err)
	begun, err := a.Client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "s", ToolUseId: "w1"})
	must("begin on A", err)
	_, err = a.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "s", ToolUseId: "w1", Output: "sent"})
	must("record on A", err)
	_, err = a.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s", ExpectedRevision: 2,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"sent"`}}})
	must("Point B on A", err)

	ledger, err := b.Client.ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: "s"})
	must("ListEffects on B", err)
	if es := ledger.GetEntries(); len(es) != 1 || es[0].GetToolUseId() != "w1" || es[0].GetIdempotencyKey() != begun.GetIdempotencyKey() ||
		es[0].GetEffect().GetOutput() != "sent" {
		t.Fatalf("ledger on B: %v", ledger)
	}

	fork, err := b.Client.ForkSession(ctx, &savepointv1.ForkSessionRequest{SourceSessionId: "s", Revision: 2, NewSessionId: "f",
		RequestId: "00000000-0000-4000-8000-0000000000f1"})
	must("fork on B", err)
	if fork.GetRevision() != 1 || fork.GetMessageCount() != 2 || len(fork.GetPerformedAfter()) != 1 || fork.GetPerformedAfter()[0].GetToolUseId() != "w1" {
		t.Fatalf("fork on B: %v", fork)
	}
	_, err = a.Client.ForkSession(ctx, &savepointv1.ForkSessionRequest{SourceSessionId: "s", NewSessionId: "f"})
	if status.Code(err) != codes.AlreadyExists || reasonOf(err) != "SESSION_EXISTS" {
		t.Fatalf("a second fork into f on A: %v (reason %q)", err, reasonOf(err))
	}

	done, err := b.Client.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{SessionId: "f",
		Status: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED, FinalOutput: "ok"})
	must("complete on B", err)
	if done.GetStatus() != savepointv1.SessionStatus_SESSION_STATUS_COMPLETED || done.GetRevision() != 1 {
		t.Fatalf("complete on B: %v", done)
	}
	list, err := a.Client.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 10, StatusFilter: savepointv1.SessionStatus_SESSION_STATUS_COMPLETED})
	must("list completed on A", err)
	if ss := list.GetSessions(); len(ss) != 1 || ss[0].GetSessionId() != "f" {
		t.Fatalf("completed sessions on A: %v", list)
	}
	list, err = a.Client.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 10, StatusFilter: savepointv1.SessionStatus_SESSION_STATUS_ACTIVE})
	must("list active on A", err)
	if ss := list.GetSessions(); len(ss) != 1 || ss[0].GetSessionId() != "s" {
		t.Fatalf("active sessions on A: %v", list)
	}
	resumed, err := a.Client.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "f"})
	must("resume f on A", err)
	if resumed.GetEpoch() != 1 || resumed.GetCheckpoint().GetStatus() != savepointv1.SessionStatus_SESSION_STATUS_COMPLETED {
		t.Fatalf("resume of the completed fork on A: %v", resumed)
	}

	rewound, err := a.Client.RewindSession(ctx, &savepointv1.RewindSessionRequest{SessionId: "s", Revision: 2})
	must("rewind on A", err)
	if rewound.GetRevision() != 4 || len(rewound.GetPerformedAfter()) != 1 || rewound.GetPerformedAfter()[0].GetToolUseId() != "w1" {
		t.Fatalf("rewind on A: %v", rewound)
	}
	rec, err := b.Client.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: "s"})
	must("reconcile on B", err)
	if len(rec.GetResolutions()) != 1 || rec.GetResolutions()[0].GetDecision() != savepointv1.Decision_DECISION_REUSE {
		t.Fatalf("reconcile after the rewind on B: %v", rec)
	}
}
