package ui

import (
	"bufio"
	"encoding/json"
	"fmt"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	stdhtml "html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func fetch(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// text is a page's text as a person reads it: tags dropped, spaces joined.
func text(html string) string {
	html = regexp.MustCompile(`(?s)<[^>]*>`).ReplaceAllString(html, " ")
	return strings.Join(strings.Fields(stdhtml.UnescapeString(html)), " ")
}

func wantText(t *testing.T, page, body string, wants ...string) {
	t.Helper()
	got := text(body)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", page, w, got)
		}
	}
}

func TestSessionsPage(t *testing.T) {
	_, base, c, d := inspector(t, false)
	code, body := fetch(t, c, base+"/sessions")
	if code != 200 {
		t.Fatalf("sessions: %d\n%s", code, body)
	}
	wantText(t, "sessions", body, "unix:"+d.Socket) // the daemon, in the header
	wantText(t, "sessions", body, "done-3 completed", "notes-2 active", "report-1 in doubt Write the weekly report 2 2 1 4 2 0/0 0 20", "team=infra")
	_, body = fetch(t, c, base+"/sessions?status=completed")
	if strings.Contains(body, "report-1") || !strings.Contains(body, "done-3") {
		t.Errorf("status=completed:\n%s", text(body))
	}
	_, body = fetch(t, c, base+"/sessions?pending=1&labels=team%3Dinfra")
	if strings.Contains(body, "notes-2") || !strings.Contains(body, "report-1") {
		t.Errorf("pending, label:\n%s", text(body))
	}
	_, body = fetch(t, c, base+"/sessions?prefix=no")
	if !strings.Contains(body, "notes-2") || strings.Contains(body, ">report-1<") {
		t.Errorf("prefix=no:\n%s", text(body))
	}
	_, body = fetch(t, c, base+"/sessions?size=1")
	wantText(t, "first page of one", body, "done-3", "Next page")
	next := regexp.MustCompile(`href="(/sessions\?[^"]*page=[^"]*)" rel="next"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatalf("no next page link:\n%s", body)
	}
	_, body = fetch(t, c, base+strings.ReplaceAll(next[1], "&amp;", "&"))
	if !strings.Contains(body, "notes-2") || strings.Contains(body, ">done-3<") {
		t.Errorf("second page of one:\n%s", text(body))
	}
	// Last update first: done-3 was completed last, report-1 saved first.
	_, body = fetch(t, c, base+"/sessions?order=updated")
	if i, j, k := strings.Index(body, ">done-3<"), strings.Index(body, ">notes-2<"), strings.Index(body, ">report-1<"); !(0 < i && i < j && j < k) {
		t.Errorf("order=updated: done-3 at %d, notes-2 at %d, report-1 at %d:\n%s", i, j, k, text(body))
	}
	if code, body := fetch(t, c, base+"/sessions?order=task"); code != 400 || !strings.Contains(body, "BAD_FILTER") {
		t.Errorf("bad order: %d %s", code, text(body))
	}
	if code, body := fetch(t, c, base+"/sessions?idle=soon"); code != 400 || !strings.Contains(body, "BAD_FILTER") {
		t.Errorf("bad idle: %d %s", code, text(body))
	}
}

func TestSessionPage(t *testing.T) {
	_, base, c, d := inspector(t, false)
	// The header's create time is the session's, as ListSessions has it, on
	// every revision's page.
	list, err := d.Client.ListSessions(t.Context(), &savepointv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	created := ""
	for _, s := range list.GetSessions() {
		if s.GetSessionId() == "report-1" && s.GetCreateTime() != nil {
			created = "Created " + formatTime(s.GetCreateTime()) + " Saved "
		}
	}
	if created == "" {
		t.Fatalf("ListSessions has no create time of report-1: %v", list)
	}
	code, body := fetch(t, c, base+"/sessions/report-1")
	if code != 200 {
		t.Fatalf("session: %d\n%s", code, body)
	}
	wantText(t, "session", body,
		"State in doubt", "Epoch 1", "Revision 2", created,
		"toolu_01 write_report side effect yes reuse its effect is recorded",
		"toolu_02 send_email side effect yes in doubt side-effecting, begun and never recorded",
		"toolu_03 post_slack side effect yes re-run begin-tracked and never begun",
		"toolu_04 delete_draft side effect no in doubt side-effecting and not begin-tracked",
		"Turn 1 Revision 1: Point A: tool uses pending (1 pending)",
		"Turn 2 Revision 2: Point A: tool uses pending (4 pending)",
		"tool_use read_notes toolu_00", `"path": "notes.txt"`,
		"tool_result toolu_00 Q3: 12 deals closed",
	)
	// The ledger: toolu_01 recorded with its size, toolu_02 begun only.
	ledger := text(body[strings.Index(body, `id="ledger"`):])
	for _, w := range []string{"toolu_01 write_report side effect", "15 B", "toolu_02 send_email side effect", "none recorded"} {
		if !strings.Contains(ledger, w) {
			t.Errorf("ledger lacks %q: %s", w, ledger)
		}
	}
	code, body = fetch(t, c, base+"/sessions/report-1?revision=1")
	if code != 200 {
		t.Fatalf("revision 1: %d", code)
	}
	wantText(t, "revision 1", body, "Revision 1 (the latest is 2)", "Reconcile decides only the latest revision", "toolu_00 read_notes read-only no -", created)
	if code, body := fetch(t, c, base+"/sessions/nobody"); code != 404 || !strings.Contains(body, "SESSION_NOT_FOUND") {
		t.Errorf("unknown session: %d %s", code, text(body))
	}
	if code, body := fetch(t, c, base+"/sessions/report-1?revision=9"); code != 404 || !strings.Contains(body, "REVISION_NOT_FOUND") {
		t.Errorf("unknown revision: %d %s", code, text(body))
	}
	code, body = fetch(t, c, base+"/sessions/report-1/messages/2?revision=2")
	if code != 200 || !strings.Contains(body, `"tool_use_id": "toolu_00"`) {
		t.Errorf("whole message: %d %s", code, body)
	}
}

func TestDaemonDownIs503(t *testing.T) {
	_, base, c, d := inspector(t, false)
	d.Kill()
	code, body := fetch(t, c, base+"/sessions")
	if code != 503 || !strings.Contains(text(body), "savepointd is not answering") {
		t.Errorf("daemon down: %d %s", code, text(body))
	}
	// It comes back, and the inspector reconnects by itself.
	d.Restart()
	if code, body := fetch(t, c, base+"/sessions"); code != 200 || !strings.Contains(body, "report-1") {
		t.Errorf("daemon back: %d %s", code, text(body))
	}
}

func TestServerPage(t *testing.T) {
	_, base, c, d := inspector(t, false)
	code, body := fetch(t, c, base+"/server")
	if code != 200 {
		t.Fatalf("server: %d %s", code, text(body))
	}
	wantText(t, "server", body, "Health serving", "Store badger (format", d.DataDir, "Saves since start 4", "Saves per second (last minute) (measuring)")
	time.Sleep(1100 * time.Millisecond)
	code, body = fetch(t, c, base+"/server/figures")
	var f map[string]string
	if code != 200 || json.Unmarshal([]byte(body), &f) != nil || f["saves"] != "4" || f["savesPerSecond"] != "0.0" || f["health"] != "serving" {
		t.Errorf("figures: %d %s", code, body)
	}
}

// TestEventsRelayWatchSessions: /events sends a new session's row within
// 2 s of its save, and a deleted one's removal.
func TestEventsRelayWatchSessions(t *testing.T) {
	_, base, c, d := inspector(t, false)
	resp, err := c.Get(base + "/events?status=active")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) string {
		t.Helper()
		deadline := time.After(2 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", want)
				}
				if strings.Contains(l, want) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q within 2s", want)
			}
		}
	}
	next("event: heartbeat")
	start := time.Now()
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "new-4", Task: "Arrive live",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"hi"`}}}); err != nil {
		t.Fatal(err)
	}
	next("event: changed")
	l := next("data: ")
	if !strings.Contains(l, `"ID":"new-4"`) || !strings.Contains(l, `"State":"active"`) || !strings.Contains(l, `"Task":"Arrive live"`) {
		t.Errorf("changed event: %s", l)
	}
	t.Logf("a new session reached the event stream in %v", time.Since(start))
	if _, err := d.Client.DeleteSession(t.Context(), &savepointv1.DeleteSessionRequest{SessionId: "new-4"}); err != nil {
		t.Fatal(err)
	}
	next("event: removed")
	if l := next("data: "); l != `data: {"id":"new-4"}` {
		t.Errorf("removed event: %s", l)
	}
}

// TestLongContentIsCut: a 40 KiB message is cut at 16 KiB with a link to
// the whole of it, and a history of 250 messages shows 200 until "Show
// all".
func TestLongContentIsCut(t *testing.T) {
	_, base, c, d := inspector(t, false)
	long := strings.Repeat("é", 20<<10) // 40 KiB of two-byte runes
	msgs := []*savepointv1.Message{{Role: "user", ContentJson: `"` + long + `"`}}
	for i := 1; i < 250; i++ {
		msgs = append(msgs, &savepointv1.Message{Role: "assistant", ContentJson: fmt.Sprintf(`"reply %d"`, i)})
	}
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "long-6", Task: "Long", AppendMessages: msgs}); err != nil {
		t.Fatal(err)
	}
	code, body := fetch(t, c, base+"/sessions/long-6")
	if code != 200 {
		t.Fatalf("long session: %d", code)
	}
	wantText(t, "long session", body, "Cut at 16 KiB.", "Showing the first 200 of 250 messages.", "reply 199")
	if strings.Contains(body, long) || strings.Contains(body, "reply 200<") || !utf8.ValidString(body) {
		t.Errorf("the long message or the 201st message is on the page, or the cut split a rune")
	}
	_, body = fetch(t, c, base+"/sessions/long-6?revision=1&all=1")
	wantText(t, "show all", body, "reply 249")
	code, body = fetch(t, c, base+"/sessions/long-6/messages/0?revision=1")
	if code != 200 || !strings.Contains(body, long) {
		t.Errorf("whole message 0: %d, %d bytes", code, len(body))
	}
}

// TestEventsSayTheDaemonWentAway: when savepointd goes away, the event
// stream says so and ends, for the browser to connect again.
func TestEventsSayTheDaemonWentAway(t *testing.T) {
	_, base, c, d := inspector(t, false)
	resp, err := c.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: heartbeat" {
	}
	d.Kill()
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "event: unavailable") || !strings.Contains(all, "savepointd is not answering") {
		t.Errorf("after the daemon went away the stream sent:\n%s", all)
	}
}
