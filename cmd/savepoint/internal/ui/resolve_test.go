package ui

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// rawPost posts form to the inspector as a browser on origin would, without
// adding the CSRF token.
func rawPost(t *testing.T, c *http.Client, base, path, origin string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ledgerEntry reads one entry of a session's ledger from the daemon.
func ledgerEntry(t *testing.T, d *daemontest.Daemon, id, toolUseID string) *savepointv1.LedgerEntry {
	t.Helper()
	resp, err := d.Client.ListEffects(t.Context(), &savepointv1.ListEffectsRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetEntries() {
		if e.GetToolUseId() == toolUseID {
			return e
		}
	}
	t.Fatalf("%s has no ledger entry %s", id, toolUseID)
	return nil
}

// decisionOf is what Reconcile answers now for one pending call.
func decisionOf(t *testing.T, d *daemontest.Daemon, id, toolUseID string) *savepointv1.Resolution {
	t.Helper()
	resp, err := d.Client.Reconcile(t.Context(), &savepointv1.ReconcileRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetResolutions() {
		if r.GetToolUse().GetToolUseId() == toolUseID {
			return r
		}
	}
	t.Fatalf("%s has no pending call %s", id, toolUseID)
	return nil
}

var requestIDField = regexp.MustCompile(`name="request_id" value="([^"]+)"`)

// confirmation posts the resolve form's first step and returns the form
// its confirmation page carries, request id included.
func confirmation(t *testing.T, s *Server, c *http.Client, base, path string, form url.Values) url.Values {
	t.Helper()
	code, body := submit(t, s, c, base, path, form)
	if code != 200 || !strings.Contains(body, `name="confirmed" value="yes"`) {
		t.Fatalf("resolve form %v: %d, no confirmation:\n%s", form, code, text(body))
	}
	m := requestIDField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the confirmation carries no request id:\n%s", body)
	}
	confirmed := url.Values{"confirmed": {"yes"}, "request_id": {m[1]}}
	for k, v := range form {
		confirmed[k] = v
	}
	return confirmed
}

func TestResolveFromTheInspector(t *testing.T) {
	s, base, c, d := inspector(t, false)
	const path = "/sessions/report-1/resolve"

	// The session page offers the form on the calls in doubt only, and
	// shows the recorded output.
	_, body := fetch(t, c, base+"/sessions/report-1")
	for _, tu := range []string{"toolu_02", "toolu_04"} {
		if !strings.Contains(body, `href="/sessions/report-1/resolve?tool_use_id=`+tu+`"`) {
			t.Errorf("the session page has no resolve link for %s", tu)
		}
	}
	for _, tu := range []string{"toolu_01", "toolu_03"} {
		if strings.Contains(body, "resolve?tool_use_id="+tu) {
			t.Errorf("the session page offers to resolve %s, which is not in doubt", tu)
		}
	}
	wantText(t, "ledger", body[strings.Index(body, `id="ledger"`):], "15 B wrote report.md -")
	wantText(t, "session header", body, "Calls 2 in doubt; resolved 0 by a verify hook, 0 by a person")

	code, body := fetch(t, c, base+path+"?tool_use_id=toolu_02")
	if code != 200 {
		t.Fatalf("resolve form: %d %s", code, text(body))
	}
	wantText(t, "resolve form", body, "tool_use_id toolu_02", "Tool send_email", `"to": "team@example.com"`, "It was done", "It was not done")
	if !strings.Contains(body, `name="csrf" value="`+s.csrf+`"`) {
		t.Errorf("the resolve form lacks the CSRF token")
	}
	for tu, want := range map[string]string{"toolu_01": "Reconcile answers reuse", "toolu_03": "Reconcile answers re-run", "toolu_99": "not pending in the latest revision"} {
		if code, body := fetch(t, c, base+path+"?tool_use_id="+tu); code != 409 || !strings.Contains(body, "CALL_NOT_IN_DOUBT") || !strings.Contains(text(body), want) {
			t.Errorf("resolve form of %s: %d %s", tu, code, text(body))
		}
	}

	// CSRF and origin: refused before anything is asked of the daemon.
	done := url.Values{"tool_use_id": {"toolu_02"}, "outcome": {"done"}, "output": {"<script>alert(1)</script>sent #7\r\nto 3 people"}, "note": {"in the mail log"}, "by": {"alice"}}
	if code, body := rawPost(t, c, base, path, base, withConfirmed(done)); code != 403 || !strings.Contains(body, "BAD_CSRF_TOKEN") {
		t.Errorf("without the CSRF token: %d %s", code, text(body))
	}
	evil := withConfirmed(done)
	evil.Set("csrf", s.csrf)
	if code, body := rawPost(t, c, base, path, "http://evil.example", evil); code != 403 || !strings.Contains(body, "CROSS_ORIGIN") {
		t.Errorf("from another origin: %d %s", code, text(body))
	}
	if e := ledgerEntry(t, d, "report-1", "toolu_02"); e.GetResolution() != nil || e.GetEffect() != nil {
		t.Fatalf("a refused POST wrote: %v", e)
	}

	// The first POST only shows the finding back, escaped.
	code, body = submit(t, s, c, base, path, done)
	if code != 200 {
		t.Fatalf("resolve: %d %s", code, text(body))
	}
	wantText(t, "confirmation", body, "Finding done", "Output <script>alert(1)</script>sent #7", "By alice (a person)", "Note in the mail log", "Record: done")
	if strings.Contains(body, "<script>alert") {
		t.Errorf("the confirmation holds the output unescaped")
	}
	if e := ledgerEntry(t, d, "report-1", "toolu_02"); e.GetResolution() != nil || e.GetEffect() != nil {
		t.Fatalf("the form's first step wrote: %v", e)
	}

	// The confirmation records it, as a person's, without an epoch: the
	// session keeps its epoch, and Reconcile reuses the output.
	confirmed := confirmation(t, s, c, base, path, done)
	code, body = submit(t, s, c, base, path, confirmed)
	if code != 200 {
		t.Fatalf("confirmed resolve: %d %s", code, text(body))
	}
	wantText(t, "result", body, "report-1 toolu_02 (send_email) is resolved: done by alice (a person) at", "the agent's next resume reuses it")
	e := ledgerEntry(t, d, "report-1", "toolu_02")
	r := e.GetResolution()
	if r.GetResolverKind() != savepointv1.ResolverKind_RESOLVER_KIND_PERSON || r.GetResolvedBy() != "alice" || r.GetNote() != "in the mail log" ||
		r.GetOutcome() != savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE || e.GetEffect().GetOutput() != "<script>alert(1)</script>sent #7\nto 3 people" {
		t.Errorf("ledger entry after the resolution: %v", e)
	}
	if res := decisionOf(t, d, "report-1", "toolu_02"); res.GetDecision() != savepointv1.Decision_DECISION_REUSE || res.GetEffect().GetOutput() != "<script>alert(1)</script>sent #7\nto 3 people" {
		t.Errorf("Reconcile after done: %v", res)
	}
	// Sent twice (a reload of the result), it is recorded once.
	if code, body := submit(t, s, c, base, path, confirmed); code != 200 || !strings.Contains(text(body), "is resolved: done by alice") {
		t.Errorf("the same confirmation again: %d %s", code, text(body))
	}

	// The session page shows the output, escaped, and who resolved it.
	_, body = fetch(t, c, base+"/sessions/report-1")
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;sent #7") {
		t.Errorf("the session page shows the output unescaped or not at all")
	}
	ledger := text(body[strings.Index(body, `id="ledger"`):])
	if !strings.Contains(ledger, "toolu_02 send_email side effect") || !strings.Contains(ledger, `resolved done by alice (a person) at`) || !strings.Contains(ledger, `“in the mail log”`) {
		t.Errorf("the ledger lacks toolu_02's resolution: %s", ledger)
	}

	// Another finding for it is refused by the daemon: a clear conflict,
	// nothing changed.
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, url.Values{"tool_use_id": {"toolu_02"}, "outcome": {"not_done"}, "by": {"bob"}}))
	if code != 409 || !strings.Contains(body, "RESOLUTION_CONFLICT") || !strings.Contains(text(body), "Nothing was changed.") {
		t.Errorf("a conflicting resolution: %d %s", code, text(body))
	}
	// A call not in doubt, posted directly, is refused by the daemon.
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, url.Values{"tool_use_id": {"toolu_03"}, "outcome": {"not_done"}}))
	if code != 409 || !strings.Contains(body, "CALL_NOT_IN_DOUBT") || !strings.Contains(text(body), "Nothing was changed.") {
		t.Errorf("a call not in doubt: %d %s", code, text(body))
	}
	// Bad forms.
	for _, f := range []url.Values{
		{"tool_use_id": {"toolu_04"}, "outcome": {"not_done"}, "output": {"x"}},
		{"tool_use_id": {"toolu_04"}, "outcome": {"maybe"}},
		{"outcome": {"done"}},
	} {
		if code, body := submit(t, s, c, base, path, f); code != 400 || !strings.Contains(body, "BAD_FORM") {
			t.Errorf("bad form %v: %d %s", f, code, text(body))
		}
	}
	bad := withConfirmed(url.Values{"tool_use_id": {"toolu_04"}, "outcome": {"not_done"}})
	bad.Set("request_id", "")
	if code, body := submit(t, s, c, base, path, bad); code != 400 || !strings.Contains(body, "BAD_FORM") {
		t.Errorf("a confirmation without its request id: %d %s", code, text(body))
	}

	// Not done: Reconcile runs it again.
	code, body = submit(t, s, c, base, path, confirmation(t, s, c, base, path, url.Values{"tool_use_id": {"toolu_04"}, "outcome": {"not_done"}, "note": {"no draft was deleted"}}))
	if code != 200 || !strings.Contains(text(body), "toolu_04 (delete_draft) is resolved: not done by - (a person)") {
		t.Errorf("not done: %d %s", code, text(body))
	}
	if res := decisionOf(t, d, "report-1", "toolu_04"); res.GetDecision() != savepointv1.Decision_DECISION_RUN ||
		res.GetResolution().GetOutcome() != savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE {
		t.Errorf("Reconcile after not done: %v", res)
	}
	// The counts: none in doubt now, two resolved by a person, on the
	// session's page and the Sessions page (ListSessions' counts).
	_, body = fetch(t, c, base+"/sessions/report-1")
	wantText(t, "session header", body, "Calls 0 in doubt; resolved 0 by a verify hook, 2 by a person")
	_, body = fetch(t, c, base+"/sessions")
	wantText(t, "sessions", body, "report-1 waiting Write the weekly report 2 2 1 4 0 0/2 0 20")
	sess, err := d.Client.GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: "report-1"})
	if err != nil || sess.GetCheckpoint().GetEpoch() != 1 || sess.GetCheckpoint().GetRevision() != 2 {
		t.Errorf("report-1 after the resolutions: epoch %d revision %d %v; a person's resolution takes no ownership", sess.GetCheckpoint().GetEpoch(), sess.GetCheckpoint().GetRevision(), err)
	}
}

func TestResolveThreadFromTheInspector(t *testing.T) {
	s, base, c, d := inspector(t, false)
	g := savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	seedThread(t, g)
	_, body := fetch(t, c, base+"/graph")
	wantText(t, "threads", body, "Calls In doubt Resolved", "thread-1 2026", " UTC 2 1 0/0")
	_, body = fetch(t, c, base+"/graph/thread?id=thread-1")
	wantText(t, "thread", body, "Ledger 1 in doubt; resolved 0 by a verify hook, 0 by a person")
	if !strings.Contains(body, `href="/graph/resolve?id=thread-1&amp;ns=&amp;tool_use_id=call_doubt"`) || strings.Contains(body, "tool_use_id=call_sent") {
		t.Errorf("the thread page's resolve links are wrong:\n%s", body)
	}
	if code, body := fetch(t, c, base+"/graph/resolve?id=thread-1&ns=&tool_use_id=call_sent"); code != 409 || !strings.Contains(body, "CALL_NOT_IN_DOUBT") {
		t.Errorf("resolve form of a recorded call: %d %s", code, text(body))
	}
	code, body := fetch(t, c, base+"/graph/resolve?id=thread-1&ns=&tool_use_id=call_doubt")
	if code != 200 {
		t.Fatalf("thread resolve form: %d %s", code, text(body))
	}
	wantText(t, "thread resolve form", body, "Thread thread-1 Namespace (root) tool_use_id call_doubt Tool send_email", `"to": "call_doubt"`)
	form := url.Values{"id": {"thread-1"}, "ns": {""}, "tool_use_id": {"call_doubt"}, "outcome": {"done"}, "output": {"sent #43"}, "by": {"carol"}}
	if code, body := rawPost(t, c, base, "/graph/resolve", base, withConfirmed(form)); code != 403 || !strings.Contains(body, "BAD_CSRF_TOKEN") {
		t.Errorf("thread resolve without the CSRF token: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/graph/resolve", confirmation(t, s, c, base, "/graph/resolve", form))
	if code != 200 || !strings.Contains(text(body), "Thread thread-1, namespace (root): call_doubt (send_email) attempt 1 is resolved: done by carol (a person)") {
		t.Fatalf("thread resolve: %d %s", code, text(body))
	}
	// The node's next run reuses it.
	resp, err := g.BeginThreadEffect(t.Context(), &savepointv1.BeginThreadEffectRequest{ThreadId: "thread-1", ToolUseId: "call_doubt", Name: "send_email", InputJson: `{"to":"call_doubt"}`})
	if err != nil || resp.GetDecision() != savepointv1.Decision_DECISION_REUSE || string(resp.GetEffect().GetOutput().GetData()) != `"sent #43"` {
		t.Errorf("BeginThreadEffect after done: %v %v", resp, err)
	}
	_, body = fetch(t, c, base+"/graph/thread?id=thread-1")
	wantText(t, "thread after", body, `"sent #43"`, "resolved done by carol (a person) at", "Ledger 0 in doubt; resolved 0 by a verify hook, 1 by a person")
	_, body = fetch(t, c, base+"/graph")
	wantText(t, "threads after", body, " UTC 2 0 0/1")
}

// withConfirmed is v with a confirmation's fields but no CSRF token.
func withConfirmed(v url.Values) url.Values {
	out := url.Values{"confirmed": {"yes"}, "request_id": {"0b6a3c57-9a55-4d1b-8f8f-0a4f3f3b2f11"}}
	for k, x := range v {
		out[k] = x
	}
	return out
}

// TestOutputsAreFolded: a long recorded output is folded in a <details>,
// one over 16 KiB is cut there with a link to the whole of it, served as
// plain text; a short one is shown as it is.
func TestOutputsAreFolded(t *testing.T) {
	_, base, c, d := inspector(t, false)
	long := strings.Repeat("line of the report\n", 30)
	huge := strings.Repeat("x", 40<<10)
	calls := []*savepointv1.ToolUse{{ToolUseId: "t_short", Name: "a"}, {ToolUseId: "t_long", Name: "b"}, {ToolUseId: "t_huge", Name: "c"}}
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "out-7", Task: "Outputs", PendingToolUses: calls,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"go"`}}}); err != nil {
		t.Fatal(err)
	}
	for id, out := range map[string]string{"t_short": "ok", "t_long": long, "t_huge": huge} {
		if _, err := d.Client.RecordEffect(t.Context(), &savepointv1.RecordEffectRequest{SessionId: "out-7", ToolUseId: id, Output: out}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := fetch(t, c, base+"/sessions/out-7")
	row := func(id string) string {
		m := regexp.MustCompile(`(?s)<tr data-tool-use="`+id+`">.*?</tr>`).FindAllString(body, -1)
		if len(m) == 0 {
			t.Fatalf("no row of %s", id)
		}
		return m[len(m)-1] // the ledger's, after the pending table's
	}
	if r := row("t_short"); !strings.Contains(r, `<pre class="output">ok</pre>`) || strings.Contains(r, "<details") {
		t.Errorf("short output: %s", r)
	}
	if r := row("t_long"); !strings.Contains(r, `<details class="output"><summary>Output: 570 B, 31 lines</summary>`) || strings.Contains(r, "Whole output") {
		t.Errorf("long output: %s", r)
	}
	r := row("t_huge")
	if !strings.Contains(r, "<summary>Output: 40.0 KiB, 1 lines</summary>") || !strings.Contains(r, "Cut at 16 KiB.") || strings.Contains(r, huge) {
		t.Errorf("huge output: %.600s", r)
	}
	m := regexp.MustCompile(`href="(/sessions/out-7/output\?[^"]+)"`).FindStringSubmatch(r)
	if m == nil {
		t.Fatalf("no whole-output link: %.600s", r)
	}
	resp, err := c.Get(base + strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != huge || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("whole output: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	if code, body := fetch(t, c, base+"/sessions/out-7/output?tool_use_id=nope"); code != 404 || !strings.Contains(body, "NO_SUCH_OUTPUT") {
		t.Errorf("no such output: %d %s", code, text(body))
	}
}
