package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Scenario 4: resume

// Resume builds a session of ResumeMessages messages and times the Go
// client's Resume, which pages through ListMessages to the end.
func (b *Bench) Resume(ctx context.Context, d *Daemon) error {
	conn, err := d.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	raw := savepointv1.NewSavepointServiceClient(conn)
	const sid = "bench-resume"
	msgs := make([]*savepointv1.Message, b.cfg.ResumeMessages)
	var bytes int64
	for i := range msgs {
		msgs[i] = textMessage(b.rng, []string{"assistant", "user"}[i%2], b.cfg.MessageBytes)
		bytes += int64(len(msgs[i].GetRole()) + len(msgs[i].GetContentJson()))
	}
	if err := buildSession(ctx, raw, sid, msgs); err != nil {
		return fmt.Errorf("building the session to resume: %w", err)
	}
	c, err := client.Dial(ctx, "unix:"+d.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var took []float64
	for range max(b.cfg.Reps, 3) {
		t0 := time.Now()
		s, err := c.Resume(ctx, sid)
		if err != nil {
			return err
		}
		el := time.Since(t0)
		if got := len(s.Messages()); got != b.cfg.ResumeMessages {
			return fmt.Errorf("resumed %d messages, want %d", got, b.cfg.ResumeMessages)
		}
		took = append(took, ms(el))
	}
	med := Median(took)
	t := &Table{
		Title:  fmt.Sprintf("4. Resume: a session of %d messages (%.1f MiB of content)", b.cfg.ResumeMessages, float64(bytes)/mib),
		Header: []string{"Resume + paging to the end, ms (median)", "min ms", "max ms", "MB/s"},
		Notes:  []string{fmt.Sprintf("The Go client's Resume (one Resume RPC, which takes ownership durably, then ListMessages pages of at most the 3 MiB response budget), %d times; MB/s is content bytes (role + content_json) over the median time.", len(took))},
	}
	t.Add(med, slices.Min(took), slices.Max(took), float64(bytes)/1e6/(med/1000))
	b.tables = append(b.tables, t)
	b.summary["resume_20mib_ms"] = med
	return nil
}

// buildSession saves msgs as session sid, in saves of at most 1,000.
func buildSession(ctx context.Context, raw savepointv1.SavepointServiceClient, sid string, msgs []*savepointv1.Message) error {
	var rev, epoch uint64
	for done := 0; done < len(msgs) || rev == 0; {
		k := min(1000, len(msgs)-done)
		resp, err := raw.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
			SessionId: sid, ExpectedRevision: rev, Epoch: epoch, RequestId: uuid.NewString(), Task: benchTask, AppendMessages: msgs[done : done+k],
		})
		if err != nil {
			return err
		}
		rev, epoch, done = resp.GetRevision(), resp.GetEpoch(), done+k
	}
	return nil
}
