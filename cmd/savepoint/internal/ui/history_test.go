package ui

import (
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestEarlierResolutionsShown: the session page's ledger shows every
// resolution of a call with its author, the earlier ones after the current
// one.
func TestEarlierResolutionsShown(t *testing.T) {
	_, base, c, d := inspector(t, true)
	resolve := func(outcome savepointv1.ResolutionOutcome, by string) {
		t.Helper()
		req := &savepointv1.ResolveEffectRequest{SessionId: "report-1", ToolUseId: "toolu_02", Outcome: outcome,
			ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, ResolvedBy: by, Note: "by " + by}
		if outcome == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE {
			req.Output = "sent"
		}
		if _, err := d.Client.ResolveEffect(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	resolve(savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE, "alice")
	cp, err := d.Client.GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: "report-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.BeginEffect(t.Context(), &savepointv1.BeginEffectRequest{SessionId: "report-1", ToolUseId: "toolu_02",
		Epoch: cp.GetCheckpoint().GetEpoch()}); err != nil {
		t.Fatal(err)
	}
	resolve(savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE, "bob")
	_, body := fetch(t, c, base+"/sessions/report-1")
	ledger := text(body[strings.Index(body, `id="ledger"`):])
	wantText(t, "ledger", ledger, "resolved done by bob (a person)", "earlier: resolved not done by alice (a person)", "“by alice”; the new attempt it allowed has begun")
	if strings.Index(ledger, "by bob") > strings.Index(ledger, "earlier: resolved not done by alice") {
		t.Errorf("the earlier resolution comes before the current one:\n%s", ledger)
	}
}
