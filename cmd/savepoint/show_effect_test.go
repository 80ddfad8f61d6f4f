package main

import (
	"bytes"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestEffectPrintsItsResolutionOnce: an output of several lines is followed
// by one "resolved" line, not one per line.
func TestEffectPrintsItsResolutionOnce(t *testing.T) {
	var buf bytes.Buffer
	p := &printer{w: &buf}
	p.effect(&savepointv1.Effect{ToolUseId: "toolu_02", Name: "send_email", Output: "sent\nto 3 people\nid 77",
		Resolution: &savepointv1.EffectResolution{Outcome: savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE,
			ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, ResolvedBy: "alice"}})
	out := buf.String()
	if n := strings.Count(out, "resolved  done by alice (person)"); n != 1 || !strings.HasSuffix(out, "resolved  done by alice (person) at -\n") {
		t.Errorf("the resolution is printed %d times, or not last:\n%s", n, out)
	}
}
