package main

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestEffectsShowRefused: `savepoint effects` tells a
// call refused before it ran from one that ran and failed.
func TestEffectsShowRefused(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	ctx := t.Context()
	c, err := client.Dial(ctx, "unix:"+d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Start(ctx, "hooks-1", "write the report", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"toolu_denied", "toolu_failed"} {
		if _, err := s.RegisterToolUse(ctx, client.ToolUse{ToolUseID: id, Name: "write_report"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RefuseToolUse(ctx, "toolu_denied", "denied by policy"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordToolUse(ctx, "toolu_failed", "disk full", true); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "--addr", "unix:"+d.Socket, "effects", "hooks-1")
	if r.code != 0 {
		t.Fatalf("effects: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	var denied, failed string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "toolu_denied"):
			denied = l
		case strings.HasPrefix(l, "toolu_failed"):
			failed = l
		}
	}
	if !strings.Contains(denied, `refused, never ran: "denied by policy"`) || strings.Contains(failed, "refused") || !strings.Contains(failed, `error "disk full"`) {
		t.Fatalf("effects output:\n%s", r.stdout)
	}
}
