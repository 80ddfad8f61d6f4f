package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// submit posts a confirmed action's form from the inspector's own origin.
func submit(t *testing.T, s *Server, c *http.Client, base, path string, form url.Values) (int, string) {
	t.Helper()
	form.Set("csrf", s.csrf)
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDiffAndExport(t *testing.T) {
	_, base, c, _ := inspector(t, false)
	code, body := fetch(t, c, base+"/sessions/report-1/diff?from=1&to=2")
	if code != 200 {
		t.Fatalf("diff: %d %s", code, text(body))
	}
	wantText(t, "diff", body, "turn 1 2", "Both share their first 2 messages; revision 1 has 0 more, revision 2 has 2 more.",
		"+ only in revision 2 · user · message 2", "tool_result toolu_00 Q3: 12 deals closed",
		"− pending in revision 1 only: toolu_00 read_notes", "+ pending in revision 2 only: toolu_01 write_report", "0 pending in both")
	code, body = fetch(t, c, base+"/sessions/report-1/export?revision=1")
	var out struct {
		Checkpoint struct {
			Revision string
			Messages []json.RawMessage
		}
		LatestRevision string
		Reconcile      json.RawMessage
	}
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil || out.Checkpoint.Revision != "1" || len(out.Checkpoint.Messages) != 2 || out.LatestRevision != "2" || out.Reconcile != nil {
		t.Errorf("export of revision 1: %d %+v\n%s", code, out, body)
	}
	_, body = fetch(t, c, base+"/sessions/report-1/export")
	if !strings.Contains(body, `"DECISION_IN_DOUBT"`) {
		t.Errorf("export of the latest lacks Reconcile's view:\n%s", body)
	}
}

func TestActions(t *testing.T) {
	s, base, c, d := inspector(t, false)
	// Every confirmation page renders and asks for ownership where it writes.
	for path, want := range map[string]string{
		"/sessions/report-1/rewind?revision=1": "as revision 3", "/sessions/report-1/complete": "Write under epoch",
		"/sessions/report-1/delete": "Take over", "/graph/copy?id=t": "Target thread", "/graph/prune?id=t": "Keep only the latest",
	} {
		if code, body := fetch(t, c, base+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s", path, code, text(body))
		}
	}
	// Fork: the confirmation lists the inherited effect, the answer the
	// daemon's.
	code, body := fetch(t, c, base+"/sessions/report-1/fork?revision=2")
	if code != 200 {
		t.Fatalf("fork confirmation: %d %s", code, text(body))
	}
	wantText(t, "fork confirmation", body, "toolu_01 write_report (side effect), recorded", "Reconcile reuses it", "toolu_02 send_email")
	code, body = submit(t, s, c, base, "/sessions/report-1/fork", url.Values{"revision": {"1"}, "new_session_id": {"report-1b"}})
	if code != 200 {
		t.Fatalf("fork: %d %s", code, text(body))
	}
	wantText(t, "fork", body, "Forked report-1 at revision 1 into report-1b: revision 1", "performed toolu_01 write_report", "in doubt toolu_02 send_email")
	code, body = submit(t, s, c, base, "/sessions/report-1/fork", url.Values{"revision": {"1"}, "new_session_id": {"report-1b"}})
	if code != 409 || !strings.Contains(body, "SESSION_EXISTS") {
		t.Errorf("fork onto an existing id: %d %s", code, text(body))
	}
	// A write needs an epoch or a take-over; a stale epoch is fenced (409)
	// and changes nothing.
	code, body = submit(t, s, c, base, "/sessions/report-1/rewind", url.Values{"revision": {"1"}})
	if code != 400 || !strings.Contains(body, "A write needs the epoch") {
		t.Errorf("rewind without ownership: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/sessions/report-1/rewind", url.Values{"revision": {"1"}, "own": {"epoch"}, "epoch": {"7"}})
	if code != 409 || !strings.Contains(body, "SESSION_FENCED") || !strings.Contains(body, "current_epoch=1") {
		t.Errorf("rewind under a stale epoch: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/sessions/report-1/rewind", url.Values{"revision": {"1"}, "own": {"epoch"}, "epoch": {"1"}})
	if code != 200 {
		t.Fatalf("rewind: %d %s", code, text(body))
	}
	wantText(t, "rewind", body, "Rewound report-1 to revision 1: its latest is now revision 3 (epoch 1, 2 messages).", "performed toolu_01")
	// Complete with a take-over: the epoch moves on.
	code, body = submit(t, s, c, base, "/sessions/notes-2/complete", url.Values{"own": {"take-over"}, "status": {"failed"}, "final_output": {"gave up"}})
	if code != 200 || !strings.Contains(text(body), "notes-2 is failed (revision 1, epoch 2).") {
		t.Errorf("complete: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/sessions/done-3/delete", url.Values{"own": {"take-over"}})
	if code != 200 || !strings.Contains(text(body), "Deleted done-3") {
		t.Errorf("delete: %d %s", code, text(body))
	}
	if code, _ := fetch(t, c, base+"/sessions/done-3"); code != 404 {
		t.Errorf("deleted session: %d, want 404", code)
	}
	r, err := d.Client.GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: "report-1"})
	if err != nil || r.GetCheckpoint().GetRevision() != 3 {
		t.Errorf("report-1 after the actions: %v %v", r.GetCheckpoint().GetRevision(), err)
	}
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	s, base, c, _ := inspector(t, true)
	_, body := fetch(t, c, base+"/sessions/report-1")
	if strings.Contains(body, "/fork") || !strings.Contains(body, "Export JSON") {
		t.Errorf("read-only session page shows actions:\n%s", text(body))
	}
	if strings.Contains(body, "/resolve?") {
		t.Errorf("read-only session page offers to resolve a call:\n%s", text(body))
	}
	if code, body := fetch(t, c, base+"/sessions/report-1/resolve?tool_use_id=toolu_02"); code != 403 || !strings.Contains(body, "READ_ONLY") {
		t.Errorf("read-only resolve form: %d %s", code, text(body))
	}
	if code, body := submit(t, s, c, base, "/sessions/report-1/resolve", url.Values{"tool_use_id": {"toolu_02"}, "outcome": {"not_done"}, "confirmed": {"yes"}}); code != 403 || !strings.Contains(body, "READ_ONLY") {
		t.Errorf("read-only resolve: %d %s", code, text(body))
	}
	if code, _ := fetch(t, c, base+"/sessions/report-1/delete"); code != 403 {
		t.Errorf("read-only delete confirmation: %d", code)
	}
	if code, body := submit(t, s, c, base, "/sessions/report-1/delete", url.Values{"own": {"take-over"}}); code != 403 || !strings.Contains(body, "READ_ONLY") {
		t.Errorf("read-only delete: %d %s", code, text(body))
	}
}
