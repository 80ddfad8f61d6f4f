package main

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestEffectsShowDuplicates: savepoint effects lists a call the
// duplicate-intent guard caught as not run, naming the call it repeats, for
// a session and for a graph thread.
func TestEffectsShowDuplicates(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	ctx := t.Context()
	raw, graph := d.Client, savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	if _, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "pay", Task: "pay bob"}); err != nil {
		t.Fatal(err)
	}
	reg := func(id string, epoch uint64) *savepointv1.BeginEffectResponse {
		t.Helper()
		r, err := raw.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "pay", ToolUseId: id, Epoch: epoch,
			ToolUse: &savepointv1.ToolUse{Name: "send_payment", InputJson: `{"amount":5}`}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reg("toolu_a", 0)
	if _, err := raw.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "pay", ToolUseId: "toolu_a", Output: "paid"}); err != nil {
		t.Fatal(err)
	}
	res, err := raw.Resume(ctx, &savepointv1.ResumeRequest{SessionId: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if r := reg("toolu_b", res.GetEpoch()); r.GetDuplicate().GetToolUseId() != "toolu_a" {
		t.Fatalf("not caught: %v", r)
	}

	begin := func(id, cp, run string) {
		t.Helper()
		if _, err := graph.BeginThreadEffect(ctx, &savepointv1.BeginThreadEffectRequest{ThreadId: "th", ToolUseId: id, Name: "send_payment",
			InputJson: `{"amount":5}`, CheckpointId: cp, RunId: run}); err != nil {
			t.Fatal(err)
		}
	}
	begin("call_a", "02", "r1")
	begin("call_b", "03", "r2")

	addr := "unix:" + d.Socket
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", addr, "effects", "pay"}, "not run: repeats toolu_a of an earlier run"},
		{[]string{"--addr", addr, "effects", "--thread", "th"}, "not run: repeats call_a of an earlier run"},
	} {
		r := runCLI(t, tc.args...)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("%v: exit %d\n%s%s", tc.args, r.code, r.stdout, r.stderr)
		}
	}
}
