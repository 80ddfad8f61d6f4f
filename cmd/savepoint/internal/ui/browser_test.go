package ui

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The browser tests drive headless Chromium (Debian's chromium package,
// which `make test-ui` installs when missing) through every screen of the
// inspector against a real savepointd, and assert what a person sees.
// $SAVEPOINT_CHROMIUM names the browser; without it they use
// /usr/bin/chromium when it exists and skip otherwise. `make test-ui` sets
// it, so there a missing browser fails rather than skips.
var screenshots = flag.String("screenshots", "", "write the browser tests' screenshots of each screen into `DIR` (make test-ui: docs/ui)")

func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SAVEPOINT_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$SAVEPOINT_CHROMIUM: %v", err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Skip("no /usr/bin/chromium (apt-get install chromium, or make test-ui, runs these tests)")
	}
	return "/usr/bin/chromium"
}

// browser is one headless Chromium with its own profile.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps, each page's worth bounded by 20 s.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (at %s)\n%s", err, b.location(), b.body())
	}
}

// loaded waits until the page at an address containing part has loaded,
// after a click that navigates.
func loaded(part string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		js := fmt.Sprintf(`location.href.includes(%q) && document.readyState === "complete"`, part)
		for {
			// While the page navigates, its old context is gone: try again.
			if ok, err := chromedp.Evaluate[bool](js)(ctx, t); err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("no page at an address with %q loaded: %w", part, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	l, _ := chromedp.Run(ctx, chromedp.Location())
	return l
}

// body is the page's text as a person sees it (innerText).
func (b *browser) body() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	return s
}

// text is the visible text of the first element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v (at %s)\n%s", sel, err, b.location(), b.body())
	}
	return strings.Join(strings.Fields(s), " ")
}

func (b *browser) eval(js string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	switch o := out.(type) {
	case *string:
		*o = fmt.Sprint(v)
	case *float64:
		*o, _ = v.(float64)
	case *bool:
		*o, _ = v.(bool)
	}
}

func (b *browser) want(sel string, wants ...string) {
	b.t.Helper()
	got := b.text(sel)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s at %s shows %q, lacking %q", sel, b.location(), got, w)
		}
	}
}

// shot saves a screenshot of the viewport as DIR/name.png with -screenshots.
func (b *browser) shot(name string) {
	b.t.Helper()
	if *screenshots == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// labelled checks that every visible form control of the page has a label
// a screen reader can read.
func (b *browser) labelled() {
	b.t.Helper()
	var unlabelled string
	b.eval(`[...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
		.filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !(e.tagName === "BUTTON" && e.innerText.trim()))
		.map(e => e.outerHTML).join("\n")`, &unlabelled)
	if unlabelled != "" {
		b.t.Errorf("%s has controls without a label:\n%s", b.location(), unlabelled)
	}
}

func TestBrowser(t *testing.T) {
	s, base, _, d := inspector(t, false)
	b := newBrowser(t) // after the inspector: it closes first, ending its event streams
	seedThread(t, savepointv1.NewGraphCheckpointServiceClient(d.Conn))

	// Without the token: 401, readable.
	b.do(chromedp.Navigate(base + "/sessions"))
	b.want("#error-reason", "NO_TOKEN")
	b.want("#error-message", "Open the URL that savepoint ui printed")
	b.shot("refused-401")

	// The printed URL: the first visit drops the token from the address
	// bar, and the cookie is out of the page's reach (HttpOnly).
	b.do(chromedp.Navigate(base+"/?token="+testToken), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	if l := b.location(); l != base+"/sessions" {
		t.Errorf("after the first visit the address is %s, want %s/sessions", l, base)
	}
	var cookies string
	b.eval(`document.cookie`, &cookies)
	if cookies != "" {
		t.Errorf("the page can read cookies %q; the token cookie must be HttpOnly", cookies)
	}

	// Sessions: each session's state as a person reads it.
	b.want(`tr[data-session="report-1"]`, "report-1", "in doubt", "Write the weekly report", "team=infra")
	b.want(`tr[data-session="done-3"]`, "completed")
	b.want(`tr[data-session="notes-2"]`, "active")
	b.labelled()
	b.do(chromedp.WaitVisible(chromedp.CSS(`#live`)))
	b.shot("sessions")

	// A session saved now appears within 2 s, without a reload.
	pctx, pcancel := context.WithTimeout(b.ctx, 10*time.Second)
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.getElementById("live").innerText.startsWith("Live")`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("the Sessions page never said it is live: %v\n%s", err, b.body())
	}
	pcancel()
	start := time.Now()
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "live-5", Task: "Appear live",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"hello"`}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-session="live-5"]`))); err != nil {
		t.Errorf("live-5 did not appear within 2 s: %v\n%s", err, b.body())
	}
	cancel()
	t.Logf("a new session appeared on the Sessions page %v after its save", time.Since(start).Round(time.Millisecond))
	b.want(`tr[data-session="live-5"]`, "live-5", "active", "Appear live")

	// An open Session page says when the session changes under it.
	b.do(chromedp.Navigate(base+"/sessions/live-5"), chromedp.WaitVisible(chromedp.CSS("#header")))
	cctx, ccancel := context.WithTimeout(b.ctx, 10*time.Second)
	if _, err := chromedp.Run(cctx, chromedp.Poll[bool](`document.getElementById("session-live").dataset.connected === "true"`)); err != nil {
		t.Fatalf("the Session page's live updates never connected: %v", err)
	}
	ccancel()
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "live-5", ExpectedRevision: 1, Task: "Appear live", Turn: 1,
		AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: `"hello back"`}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(b.ctx, 2*time.Second)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#session-live"))); err != nil {
		t.Errorf("the Session page did not say within 2 s that live-5 changed: %v", err)
	}
	cancel()
	b.want("#session-live", "This session changed: revision 2, epoch 1, active.", "Reload")
	b.do(chromedp.Navigate(base + "/sessions"))

	// Filters, from the form.
	b.do(chromedp.SetValue(chromedp.CSS(`select[name=status]`), "completed"), chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
		loaded("status=completed"), chromedp.WaitVisible(chromedp.CSS(`tr[data-session="done-3"]`)))
	if got := b.text("#sessions tbody"); strings.Contains(got, "report-1") {
		t.Errorf("status=completed shows %q", got)
	}

	// A narrow window: nothing wider than the window but the tables, which
	// scroll in their own box.
	b.do(chromedp.EmulateViewport(420, 800), chromedp.Navigate(base+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	var wide bool
	b.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &wide)
	if wide {
		t.Errorf("the Sessions page is wider than a 420 px window")
	}
	b.shot("sessions-narrow")
	b.do(chromedp.EmulateViewport(1280, 800))

	// Session: the in-doubt decision and why, the reuse, the ledger rows.
	b.do(chromedp.Click(chromedp.CSS(`a[href="/sessions/report-1"]`)), loaded("/sessions/report-1"), chromedp.WaitVisible(chromedp.CSS("#pending")))
	b.want("#state", "in doubt")
	b.want(`#pending tr[data-tool-use="toolu_02"]`, "send_email", "in doubt", "begun and never recorded", "may have taken effect")
	b.want(`#pending tr[data-tool-use="toolu_01"]`, "write_report", "reuse", "its effect is recorded")
	b.want(`#pending tr[data-tool-use="toolu_03"]`, "re-run", "never begun")
	b.want(`#ledger tr[data-tool-use="toolu_01"]`, "write_report", "side effect", "15 B", "revision 2")
	b.want(`#ledger tr[data-tool-use="toolu_02"]`, "send_email", "none recorded")
	var rows float64
	b.eval(`document.querySelectorAll("#ledger tbody tr").length`, &rows)
	if rows != 2 {
		t.Errorf("the ledger shows %v rows, want 2", rows)
	}
	b.want("#timeline", "Turn 1", "Revision 1: Point A: tool uses pending", "tool_use read_notes toolu_00", `"path": "notes.txt"`,
		"Turn 2", "tool_result toolu_00", "Q3: 12 deals closed")
	b.labelled()
	b.shot("session")

	// Keyboard: the first Tab reaches the skip link, whose Enter moves to
	// the content.
	var focused string
	b.do(chromedp.KeyEvent("\t"))
	b.eval(`document.activeElement.innerText`, &focused)
	if focused != "Skip to content" {
		t.Errorf("the first Tab focuses %q, want the skip link", focused)
	}

	// Time travel and the diff.
	b.do(chromedp.SetValue(chromedp.CSS(`form[aria-label="Time travel"] select`), "1"), chromedp.Click(chromedp.CSS(`form[aria-label="Time travel"] button`)),
		loaded("revision=1"), chromedp.WaitVisible(chromedp.CSS("#pending")))
	b.want("#revision", "1 (the latest is 2)")
	b.want("main", "Reconcile decides only the latest revision's pending tool uses")
	b.do(chromedp.SetValue(chromedp.CSS(`form[aria-label="Compare two revisions"] select[name=from]`), "1"),
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Compare two revisions"] select[name=to]`), "2"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Compare two revisions"] button`)), chromedp.WaitVisible(chromedp.CSS("#diff-summary")))
	b.want("#diff-summary", "Both share their first 2 messages; revision 1 has 0 more, revision 2 has 2 more.")
	b.want("#diff-history", "+ only in revision 2", "tool_result toolu_00")
	b.want("#diff-pending", "pending in revision 1 only: toolu_00 read_notes", "pending in revision 2 only: toolu_02 send_email")
	b.shot("diff")

	// Export: the link serves savepoint export's JSON.
	b.do(chromedp.Navigate(base+"/sessions/report-1"), chromedp.WaitVisible(chromedp.CSS("#pending")))
	var exported string
	b.eval(`fetch(document.querySelector('a[download]').href).then(r => r.json()).then(j => j.checkpoint.sessionId + " " + j.latestRevision + " " + j.reconcile.resolutions.length)`, &exported)
	if exported != "report-1 2 4" {
		t.Errorf("export: %q, want report-1 2 4", exported)
	}

	// Fork, through its confirmation, which lists the inherited effect.
	b.do(chromedp.Click(chromedp.CSS(`a[href="/sessions/report-1/fork?revision=2"]`)), loaded("/fork?revision=2"), chromedp.WaitVisible(chromedp.CSS("#inherited")))
	b.want("#inherited", "toolu_01 write_report", "Reconcile reuses it")
	b.labelled()
	b.shot("confirm-fork")
	b.do(chromedp.SetValue(chromedp.CSS(`input[name=new_session_id]`), "report-1-fork"), chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "Forked report-1 at revision 2 into report-1-fork: revision 1")

	// Rewind: a stale epoch is refused with the daemon's reason, then the
	// right one is accepted.
	rewind := func(epoch string) {
		b.do(chromedp.Navigate(base+"/sessions/report-1?revision=1"), chromedp.WaitVisible(chromedp.CSS("#pending")),
			chromedp.Click(chromedp.CSS(`a[href="/sessions/report-1/rewind?revision=1"]`)), loaded("/rewind?revision=1"), chromedp.WaitVisible(chromedp.CSS("#own-epoch")),
			chromedp.Click(chromedp.CSS("#own-epoch")), chromedp.SendKeys(chromedp.CSS("#epoch-input"), epoch), chromedp.Click(chromedp.CSS("#confirm")),
			chromedp.WaitVisible(chromedp.CSS("#result, #error-reason")))
	}
	rewind("9")
	b.want("#error-reason", "SESSION_FENCED (Aborted)")
	b.want("h1", "409")
	b.shot("refused-fenced")
	rewind("1")
	b.want("#result", "Rewound report-1 to revision 1: its latest is now revision 3")
	b.want("#after", "performed toolu_01 write_report")

	// Complete and delete, each with a take-over.
	b.do(chromedp.Navigate(base+"/sessions/notes-2"), chromedp.WaitVisible(chromedp.CSS("#header")),
		chromedp.Click(chromedp.CSS(`a[href="/sessions/notes-2/complete"]`)), loaded("/notes-2/complete"), chromedp.WaitVisible(chromedp.CSS("#own-take-over")),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=final_output]`), "The summary."), chromedp.Click(chromedp.CSS("#own-take-over")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "notes-2 is completed (revision 1, epoch 2).")
	b.do(chromedp.Navigate(base+"/sessions/done-3/delete"), chromedp.WaitVisible(chromedp.CSS("#own-take-over")),
		chromedp.Click(chromedp.CSS("#own-take-over")), chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "Deleted done-3")
	b.do(chromedp.Navigate(base+"/sessions/done-3"), chromedp.WaitVisible(chromedp.CSS("#error-reason")))
	b.want("#error-reason", "SESSION_NOT_FOUND")
	b.want("h1", "404")

	// Graph threads: decoded msgpack and JSON, pickle left alone.
	b.do(chromedp.Navigate(base+"/graph"), chromedp.WaitVisible(chromedp.CSS("#threads")))
	b.want(`tr[data-thread="thread-1"]`, "thread-1", " UTC")
	b.shot("graph-threads")
	b.do(chromedp.Click(chromedp.CSS(`a[href="/graph/thread?id=thread-1"]`)), loaded("thread?id=thread-1"), chromedp.WaitVisible(chromedp.CSS("#cp-2")))
	b.want("#cp-2", "parent 1", `"source": "loop"`, `"messages": [`, `"hi"`, "msgpack", `"steps": [`, "pickle", "never unpickles", "task-a", `"tool call"`)
	b.shot("graph-thread")
	b.do(chromedp.Click(chromedp.CSS(`a[href="/graph/copy?id=thread-1"]`)), loaded("/graph/copy"), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "Copied 2 checkpoints of thread thread-1 into thread thread-1-copy.")
	b.do(chromedp.Navigate(base+"/graph/prune?id=thread-1-copy"), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "Pruned thread thread-1-copy: 1 checkpoints deleted.")
	b.do(chromedp.Navigate(base+"/graph/delete?id=thread-1-copy"), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
	b.want("#result", "Deleted thread thread-1-copy")

	// Server.
	b.do(chromedp.Navigate(base+"/server"), chromedp.WaitVisible(chromedp.CSS("#server-info")))
	b.want("#server-info", "Health", "serving", "badger", d.DataDir, "Saves since start")
	b.shot("server")

	// CSRF: the page's own POST without the token is refused.
	var status float64
	b.eval(`fetch("/sessions/notes-2/delete", {method: "POST", body: new URLSearchParams({own: "take-over"})}).then(r => r.status)`, &status)
	if status != 403 {
		t.Errorf("a POST without the CSRF token: %v, want 403", status)
	}
	// Another origin (another port of 127.0.0.1: the same site, so the
	// cookie goes along) posting a form to the inspector is refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s/sessions/notes-2/delete"><input name=csrf value=%s><input name=own value=take-over></form><script>document.getElementById("f").submit()</script>`, base, s.csrf)
	}))
	defer evil.Close()
	b.do(chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#error-reason")))
	b.want("#error-reason", "CROSS_ORIGIN")
	if _, err := d.Client.GetSession(t.Context(), &savepointv1.GetSessionRequest{SessionId: "notes-2"}); err != nil {
		t.Errorf("notes-2 after the refused cross-origin delete: %v", err)
	}

	// The daemon goes away under an open Sessions page: the page says its
	// live updates paused, and once the daemon is back it reconnects by
	// itself and shows new sessions again.
	b.do(chromedp.Navigate(base+"/sessions"), chromedp.WaitVisible(chromedp.CSS(`tr[data-session="report-1"]`)))
	liveSays := func(prefix string, within time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b.ctx, within+5*time.Second)
		defer cancel()
		js := fmt.Sprintf(`document.getElementById("live").innerText.startsWith(%q)`, prefix)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within))); err != nil {
			t.Fatalf("the Sessions page never said %q: %v\n%s", prefix, err, b.body())
		}
	}
	liveSays("Live:", 5*time.Second)
	d.Kill()
	liveSays("Live updates paused", 10*time.Second)
	b.want("#live", "savepointd is not answering")
	b.shot("sessions-paused")
	d.Restart()
	liveSays("Live:", 15*time.Second)
	if _, err := d.Client.SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: "zz-after-restart", Task: "After the restart",
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"again"`}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(b.ctx, 2*time.Second)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-session="zz-after-restart"]`))); err != nil {
		t.Errorf("a session saved after the restart did not appear within 2 s: %v\n%s", err, b.body())
	}
	cancel()

	// A page loaded while the daemon is away is a readable 503.
	d.Kill()
	b.do(chromedp.Navigate(base+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#error-reason")))
	b.want("h1", "503")
	b.want("#error-message", "savepointd is not answering")
	b.shot("refused-unavailable")
	d.Restart()
}
