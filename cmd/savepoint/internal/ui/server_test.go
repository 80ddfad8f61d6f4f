package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
)

const testToken = "test-token-0123456789"

// guarded starts the inspector with a test page behind its guard: GET
// /test/ok and POST /test/post answer 200 "ok" when the guard lets them
// through. No daemon is needed: the client dials lazily.
func guarded(t *testing.T, readOnly bool) (*Server, *httptest.Server) {
	t.Helper()
	c, err := client.Dial(t.Context(), "unix:/nonexistent/savepoint-ui-test.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := New(Options{Client: c, Token: testToken, ReadOnly: readOnly, DaemonAddr: "unix:/nonexistent/savepoint-ui-test.sock"})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	s.mux.HandleFunc("GET /test/ok", ok)
	s.mux.HandleFunc("POST /test/post", ok)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("%s %s: Referrer-Policy %q, want no-referrer", req.Method, req.URL, got)
	}
	return resp, string(b)
}

func get(t *testing.T, rawURL string, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", rawURL, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return do(t, req)
}

func tokenCookie(ts *httptest.Server) *http.Cookie {
	u, _ := url.Parse(ts.URL)
	return &http.Cookie{Name: "savepoint_ui_" + u.Port(), Value: testToken}
}

func TestRequestsWithoutTheTokenGet401(t *testing.T) {
	_, ts := guarded(t, false)
	resp, body := get(t, ts.URL+"/test/ok", nil)
	if resp.StatusCode != 401 || !strings.Contains(body, "NO_TOKEN") || !strings.Contains(body, "savepoint ui printed") {
		t.Errorf("no token: %d %q", resp.StatusCode, body)
	}
	if strings.Contains(body, "savepoint-ui-test.sock") {
		t.Errorf("the 401 page names the daemon's address:\n%s", body)
	}
	resp, body = get(t, ts.URL+"/test/ok?token=wrong", nil)
	if resp.StatusCode != 401 || !strings.Contains(body, "BAD_TOKEN") {
		t.Errorf("wrong token: %d %q", resp.StatusCode, body)
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("wrong token set a cookie: %s", c)
	}
	resp, _ = get(t, ts.URL+"/test/ok", &http.Cookie{Name: tokenCookie(ts).Name, Value: "wrong"})
	if resp.StatusCode != 401 {
		t.Errorf("wrong cookie: %d", resp.StatusCode)
	}
	// The cookie of an inspector on another port does not count.
	resp, _ = get(t, ts.URL+"/test/ok", &http.Cookie{Name: "savepoint_ui_1", Value: testToken})
	if resp.StatusCode != 401 {
		t.Errorf("another port's cookie: %d", resp.StatusCode)
	}
}

func TestFirstVisitMovesTheTokenIntoACookie(t *testing.T) {
	_, ts := guarded(t, false)
	resp, _ := get(t, ts.URL+"/test/ok?status=active&token="+testToken, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/test/ok?status=active" {
		t.Fatalf("first visit: %d to %q, want 303 to /test/ok?status=active", resp.StatusCode, resp.Header.Get("Location"))
	}
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == tokenCookie(ts).Name {
			c = k
		}
	}
	if c == nil || c.Value != testToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v, want %s=token, HttpOnly, SameSite=Strict, Path=/", c, tokenCookie(ts).Name)
	}
	// A path that would make a protocol-relative Location stays on the
	// inspector.
	if resp, _ := get(t, ts.URL+"//evil.example/x?token="+testToken, nil); resp.Header.Get("Location") != "/evil.example/x" {
		t.Errorf("//evil.example/x redirects to %q", resp.Header.Get("Location"))
	}
	resp, body := get(t, ts.URL+"/test/ok", c)
	if resp.StatusCode != 200 || body != "ok" {
		t.Errorf("with the cookie: %d %q", resp.StatusCode, body)
	}
}

func TestEveryResponseSendsNoReferrer(t *testing.T) {
	_, ts := guarded(t, false)
	// do checks the header on each: 401, 303, 200, 404, 403, 405.
	get(t, ts.URL+"/test/ok", nil)
	get(t, ts.URL+"/?token="+testToken, nil)
	get(t, ts.URL+"/test/ok", tokenCookie(ts))
	get(t, ts.URL+"/static/style.css", tokenCookie(ts))
	if resp, _ := get(t, ts.URL+"/nowhere", tokenCookie(ts)); resp.StatusCode != 404 {
		t.Errorf("unknown page: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/test/post", nil)
	req.AddCookie(tokenCookie(ts))
	do(t, req)
	req, _ = http.NewRequest("PUT", ts.URL+"/test/ok", nil)
	req.AddCookie(tokenCookie(ts))
	if resp, _ := do(t, req); resp.StatusCode != 405 {
		t.Errorf("PUT: %d, want 405", resp.StatusCode)
	}
}

func TestHostHeaderMustBeLoopback(t *testing.T) {
	_, ts := guarded(t, false)
	u, _ := url.Parse(ts.URL)
	for host, want := range map[string]int{
		"evil.example:" + u.Port(): 403,
		"evil.example":             403,
		"10.0.0.1:" + u.Port():     403,
		"localhost:" + u.Port():    200,
		"[::1]:" + u.Port():        200,
		"127.0.0.1:" + u.Port():    200,
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/test/ok", nil)
		req.Host = host
		req.AddCookie(&http.Cookie{Name: cookieName(host), Value: testToken})
		resp, body := do(t, req)
		if resp.StatusCode != want || (want == 403 && (!strings.Contains(body, "HOST_NOT_LOOPBACK") || strings.Contains(body, "savepoint-ui-test.sock"))) {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func post(t *testing.T, ts *httptest.Server, form url.Values, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+"/test/post", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.AddCookie(tokenCookie(ts))
	return do(t, req)
}

func TestPostsNeedTheCSRFTokenAndTheOwnOrigin(t *testing.T) {
	s, ts := guarded(t, false)
	own := map[string]string{"Origin": ts.URL}
	for _, c := range []struct {
		name   string
		form   url.Values
		header map[string]string
		status int
		reason string
	}{
		{"no csrf", url.Values{}, own, 403, "BAD_CSRF_TOKEN"},
		{"wrong csrf", url.Values{"csrf": {"x"}}, own, 403, "BAD_CSRF_TOKEN"},
		{"the token is not the csrf token", url.Values{"csrf": {testToken}}, own, 403, "BAD_CSRF_TOKEN"},
		{"another origin", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": "http://evil.example"}, 403, "CROSS_ORIGIN"},
		{"another port", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": "http://127.0.0.1:1"}, 403, "CROSS_ORIGIN"},
		{"cross-site fetch", url.Values{"csrf": {s.csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "CROSS_ORIGIN"},
		{"null origin, not same-origin", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-site"}, 403, "CROSS_ORIGIN"},
		{"null origin, no fetch metadata", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": "null"}, 403, "CROSS_ORIGIN"},
		{"accepted, the own page's form under no-referrer", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"accepted", url.Values{"csrf": {s.csrf}}, own, 200, ""},
		{"accepted, same-origin fetch", url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}, 200, ""},
	} {
		resp, body := post(t, ts, c.form, c.header)
		if resp.StatusCode != c.status || !strings.Contains(body, c.reason) {
			t.Errorf("%s: %d %q, want %d %s", c.name, resp.StatusCode, body, c.status, c.reason)
		}
	}
}

func TestReadOnlyRefusesEveryPost(t *testing.T) {
	s, ts := guarded(t, true)
	resp, body := post(t, ts, url.Values{"csrf": {s.csrf}}, map[string]string{"Origin": ts.URL})
	if resp.StatusCode != 403 || !strings.Contains(body, "READ_ONLY") {
		t.Errorf("read-only post: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, ts.URL+"/test/ok", tokenCookie(ts)); resp.StatusCode != 200 {
		t.Errorf("read-only get: %d", resp.StatusCode)
	}
}

func TestCheckListen(t *testing.T) {
	for _, a := range []string{"127.0.0.1:0", "127.0.0.2:8080", "[::1]:0", "localhost:9999"} {
		if err := CheckListen(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for a, want := range map[string]string{
		"0.0.0.0:0":        "not a loopback address",
		"192.168.1.2:8080": "not a loopback address",
		":8080":            "not a loopback address",
		"example.com:80":   "not a loopback address",
		"127.0.0.1":        "not HOST:PORT",
	} {
		if err := CheckListen(a); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", a, err, want)
		}
	}
}

func TestRedirectFileIsPrivateAndTheBrowserNeverSeesTheToken(t *testing.T) {
	url := "http://127.0.0.1:4242/?token=" + testToken
	path, err := WriteRedirectFile(t.TempDir(), url)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("redirect file mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `content="0;url=http://127.0.0.1:4242/?token=`+testToken) {
		t.Errorf("redirect file does not send the browser on:\n%s", b)
	}
	look := func(name string) (string, error) { return "/usr/bin/" + name, nil }
	for env, want := range map[string]string{"": "/usr/bin/xdg-open", "firefox --new-tab": "/usr/bin/firefox"} {
		cmd, err := BrowserCommand(path, func(string) string { return env }, look)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Path != want || cmd.Args[len(cmd.Args)-1] != "file://"+path || strings.Contains(strings.Join(cmd.Args, " "), testToken) {
			t.Errorf("$BROWSER=%q: %v %q", env, cmd.Path, cmd.Args)
		}
	}
	none := func(string) (string, error) { return "", os.ErrNotExist }
	if _, err := BrowserCommand(path, func(string) string { return "" }, none); err == nil || !strings.Contains(err.Error(), "open the printed URL") {
		t.Errorf("no browser: %v", err)
	}
}
