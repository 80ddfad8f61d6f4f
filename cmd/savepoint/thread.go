package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// A graph thread (GraphCheckpointService: LangGraph's checkpoints) as show,
// effects and export --thread print it: its checkpoints' headers and its
// ledger, with what a node running each tool use again would be answered.

// threadView is what show and export --thread read of a thread.
type threadView struct {
	id          string
	checkpoints []threadCheckpoint // newest first, every namespace
	effects     []*savepointv1.ThreadEffect
}

// threadCheckpoint is one checkpoint's header and how many pending writes
// it holds.
type threadCheckpoint struct {
	cp     *savepointv1.GraphCheckpoint
	writes int
}

// loadThread reads a thread's checkpoint headers (the values' bytes are
// skipped) and its ledger. A thread with neither is errThreadNotFound.
func loadThread(ctx context.Context, c *client.Client, id string) (*threadView, error) {
	v := &threadView{id: id}
	stream, err := c.Graph().ListCheckpoints(ctx, &savepointv1.ListCheckpointsRequest{ThreadId: id})
	if err != nil {
		return nil, err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if cp := m.GetCheckpoint(); cp != nil {
			cp.Checkpoint = &savepointv1.TypedValue{Type: cp.GetCheckpoint().GetType(), TotalSize: cp.GetCheckpoint().GetTotalSize()}
			v.checkpoints = append(v.checkpoints, threadCheckpoint{cp: cp})
		}
		if n := len(v.checkpoints); n > 0 {
			v.checkpoints[n-1].writes += len(m.GetPendingWrites())
		}
	}
	if v.effects, err = c.ThreadEffects(ctx, id); err != nil {
		return nil, err
	}
	if len(v.checkpoints) == 0 && len(v.effects) == 0 {
		return nil, fmt.Errorf("%w %q: it holds no checkpoints and no ledger entries; savepoint ui lists the threads kept", errThreadNotFound, id)
	}
	return v, nil
}

// errThreadNotFound is a thread with nothing stored; it exits 3 as a
// missing session does.
var errThreadNotFound = errors.New("no graph thread")

func printThread(w io.Writer, v *threadView) error {
	p := &printer{w: w}
	p.line("thread    %s", v.id)
	p.line("calls     %s", cli.CountThreadLedger(v.effects))
	p.line("")
	p.line("Checkpoints (%d), newest first", len(v.checkpoints))
	for _, c := range v.checkpoints {
		parent := c.cp.GetParentCheckpointId()
		if parent == "" {
			parent = "-"
		}
		p.line("  %s  namespace %s  parent %s  %s", c.cp.GetCheckpointId(), nsText(c.cp.GetCheckpointNs()), parent, cli.Count(c.writes, "pending write"))
		p.line("    metadata  %s", compact(c.cp.GetMetadataJson()))
	}
	p.line("")
	p.line("Ledger (%d), with what a node running each tool use again is answered", len(v.effects))
	for _, e := range v.effects {
		p.line("  %s  %s  namespace %s  %s, attempt %d, %s", e.GetToolUseId(), e.GetName(), nsText(e.GetCheckpointNs()),
			effectClassText(e.GetEffectClass()), e.GetAttempts(), threadEffectStateText(e.GetState()))
		p.line("    input     %s", compact(e.GetInputJson()))
		p.line("    key       %s", e.GetIdempotencyKey())
		p.line("    begun     %s", formatTime(e.GetBeginTime()))
		if e.GetOutput() != nil {
			p.line("    recorded  %s: %s", formatTime(e.GetRecordTime()), outputText(e.GetOutput()))
		}
		if r := e.GetResolution(); r != nil {
			p.line("    resolved  %s", resolutionText(r))
		}
		for _, s := range earlierDecisions(e.GetResolutions(), e.GetApprovals(), e.GetApproval()) {
			p.line("    earlier   %s", s)
		}
		d, why := client.NextBegin(e)
		p.line("    next      %s: %s", decisionName(d), why)
	}
	return p.err
}

// printThreadEffects prints a thread's ledger as a table.
func printThreadEffects(w io.Writer, effects []*savepointv1.ThreadEffect) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tTOOL USE\tNAME\tCLASS\tATTEMPT\tSTATE\tBEGUN\tRECORDED\tNEXT\tOUTCOME")
	for _, e := range effects {
		outcome := "none recorded"
		if e.GetOutput() != nil {
			outcome = outputText(e.GetOutput())
		}
		if r := e.GetResolution(); r != nil {
			outcome += ", resolved " + resolutionText(r)
		}
		if a := e.GetApproval(); a != nil {
			outcome += ", " + approvalText(a)
		}
		outcome += earlierOutcome(e.GetResolutions(), e.GetApprovals(), e.GetApproval())
		if dup := e.GetDuplicateOf(); dup != "" {
			outcome = "not run: repeats " + dup + " of an earlier run"
		}
		d, _ := client.NextBegin(e)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", nsText(e.GetCheckpointNs()), e.GetToolUseId(), e.GetName(),
			effectClassText(e.GetEffectClass()), e.GetAttempts(), threadEffectStateText(e.GetState()),
			formatTime(e.GetBeginTime()), formatTime(e.GetRecordTime()), decisionName(d), outcome)
	}
	return tw.Flush()
}

// threadExport is the JSON object export --thread prints; its fields hold
// proto JSON.
type threadExport struct {
	ThreadID    string            `json:"threadId"`
	Checkpoints []json.RawMessage `json:"checkpoints"`
	Effects     []json.RawMessage `json:"effects"`
}

func exportThread(v *threadView) (any, error) {
	out := threadExport{ThreadID: v.id, Checkpoints: []json.RawMessage{}, Effects: []json.RawMessage{}}
	for _, c := range v.checkpoints {
		b, err := protojson.Marshal(c.cp)
		if err != nil {
			return nil, err
		}
		out.Checkpoints = append(out.Checkpoints, b)
	}
	for _, e := range v.effects {
		b, err := protojson.Marshal(e)
		if err != nil {
			return nil, err
		}
		out.Effects = append(out.Effects, b)
	}
	return out, nil
}

func nsText(ns string) string {
	if ns == "" {
		return "(root)"
	}
	return ns
}

// threadEffectStateText is the state's enum name without its prefix, in
// lower case: "begun", "succeeded", "failed".
func threadEffectStateText(s savepointv1.ThreadEffectState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "THREAD_EFFECT_STATE_"))
}

// decisionName is the decision's enum name without its prefix: "REUSE",
// "RUN", "IN_DOUBT".
func decisionName(d savepointv1.Decision) string {
	return strings.TrimPrefix(d.String(), "DECISION_")
}

// outputText shows a recorded output: JSON compacted, other UTF-8 text
// quoted, each cut at 80 characters; anything else as its serializer's
// type and size.
func outputText(v *savepointv1.TypedValue) string {
	d := v.GetData()
	if v.GetType() == "json" && json.Valid(d) {
		if r := []rune(compact(string(d))); len(r) > 80 {
			return string(r[:80]) + "…"
		} else {
			return string(r)
		}
	}
	if utf8.Valid(d) && v.GetType() != "msgpack" && v.GetType() != "pickle" {
		return quoteLine(string(d))
	}
	return fmt.Sprintf("%s, %d bytes", v.GetType(), v.GetTotalSize())
}
