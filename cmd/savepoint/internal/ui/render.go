package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pages holds each page's template, parsed with the layout.
var pages = parsePages()

var funcs = template.FuncMap{
	"time":       formatTime,
	"status":     statusName,
	"class":      effectClassText,
	"prettyJSON": prettyJSON,
	"bytes":      formatBytes,
	"bytes64":    func(n int64) string { return formatBytes(int(n)) },
	"join":       strings.Join,
	"next":       func(n uint64) uint64 { return n + 1 },
}

func parsePages() map[string]*template.Template {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" || n == "templates/partials.html" {
			continue
		}
		t := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n))
		out[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return out
}

// page is what the layout needs of every page, with the page's own data.
type page struct {
	Title    string
	Nav      string // the section to highlight: sessions, graph, server
	CSRF     string
	ReadOnly bool
	Daemon   string
	Data     any
}

// render writes the named page with status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	var buf bytes.Buffer
	p := page{Title: title, Nav: nav, CSRF: s.csrf, ReadOnly: s.opts.ReadOnly, Daemon: s.opts.DaemonAddr, Data: data}
	if !s.authorized(r) {
		// A request without the token, or to a Host that is not loopback
		// (a DNS-rebinding page can read the answer), learns nothing of
		// the daemon or the CSRF token.
		p.CSRF, p.Daemon = "", ""
	}
	err := pages[name].Execute(&buf, p)
	if err != nil {
		// A template bug: say so in plain text rather than half a page.
		http.Error(w, fmt.Sprintf("The inspector could not render the %s page: %v.", name, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		buf.WriteTo(w)
	}
}

func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil || !ts.IsValid() || (ts.GetSeconds() == 0 && ts.GetNanos() == 0) {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.DateTime) + " UTC"
}

func statusName(s savepointv1.SessionStatus) string {
	switch s {
	case savepointv1.SessionStatus_SESSION_STATUS_ACTIVE:
		return "active"
	case savepointv1.SessionStatus_SESSION_STATUS_COMPLETED:
		return "completed"
	case savepointv1.SessionStatus_SESSION_STATUS_FAILED:
		return "failed"
	}
	return "-"
}

func effectClassText(c savepointv1.EffectClass) string {
	switch c {
	case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
		return "read-only"
	case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
		return "idempotent"
	}
	return "side effect"
}

// prettyJSON indents JSON text; text that is not JSON is returned as is.
func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

func formatBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
