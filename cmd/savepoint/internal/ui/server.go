// Package ui is the web inspector that `savepoint ui` serves on loopback:
// server-rendered pages of a savepointd's sessions, ledger, graph threads
// and server, read over the daemon's gRPC API like every other client.
//
// Every request must carry the inspector's random token, as the cookie the
// first visit sets or as the token query parameter; every mutating request
// is a POST carrying the CSRF token, from the inspector's own origin, and
// the Host header must name a loopback address (no DNS rebinding).
package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/savepoint-dev/savepoint/client"
)

// Options configure a Server.
type Options struct {
	// Client is the connection to savepointd that every page reads through.
	Client *client.Client
	// DaemonAddr is the daemon's address, shown on the pages.
	DaemonAddr string
	// ReadOnly refuses every action (403) and hides their buttons.
	ReadOnly bool
	// Timeout bounds each RPC a request makes; zero means 30 seconds.
	Timeout time.Duration
	// Person is the name a resolution made from the inspector is recorded
	// under unless the form names another (savepoint ui: the user running
	// it); empty records none.
	Person string
	// Token is the secret every request must carry; empty means a new
	// random one (tests set it).
	Token string
}

// Server is the inspector's HTTP handler.
type Server struct {
	opts  Options
	csrf  string
	mux   *http.ServeMux
	rates rates // the Server page's counter readings
}

// New returns the inspector for o.Client, with a random token unless
// o.Token is set.
func New(o Options) (*Server, error) {
	if o.Client == nil {
		return nil, errors.New("ui: Options.Client is nil; the inspector needs a client of savepointd.")
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Token == "" {
		o.Token = rand.Text()
	}
	mac := hmac.New(sha256.New, []byte(o.Token))
	mac.Write([]byte("savepoint ui csrf"))
	s := &Server{opts: o, csrf: base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

// Token returns the secret that the printed URL carries.
func (s *Server) Token() string { return s.opts.Token }

// URL returns the address to print for a listener at addr (host:port): the
// inspector's root with the token as its query parameter.
func (s *Server) URL(addr net.Addr) string {
	return (&url.URL{Scheme: "http", Host: addr.String(), Path: "/", RawQuery: "token=" + url.QueryEscape(s.opts.Token)}).String()
}

// ServeHTTP checks the Host header, the token and, on a POST, the origin and
// the CSRF token, before serving the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("Cache-Control", "no-store")
	if !loopbackHost(r.Host) {
		s.refuse(w, r, http.StatusForbidden, "HOST_NOT_LOOPBACK",
			fmt.Sprintf("The Host header %q does not name a loopback address. The inspector answers only requests to 127.0.0.1, [::1] or localhost.", r.Host))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		h.Set("Allow", "GET, HEAD, POST")
		s.refuse(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("The inspector does not answer %s requests.", r.Method))
		return
	}
	if q := r.URL.Query(); q.Has("token") {
		if !s.validToken(q.Get("token")) {
			s.refuse(w, r, http.StatusUnauthorized, "BAD_TOKEN", "The token in this URL is not this inspector's. Open the URL that savepoint ui printed.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName(r.Host), Value: s.opts.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		if r.Method != http.MethodPost {
			// The token leaves the address bar (and the history) at once.
			q.Del("token")
			u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()} // never "//host": no open redirect
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
	} else if c, err := r.Cookie(cookieName(r.Host)); err != nil || !s.validToken(c.Value) {
		s.refuse(w, r, http.StatusUnauthorized, "NO_TOKEN", "This inspector needs its token. Open the URL that savepoint ui printed; its first visit sets the cookie.")
		return
	}
	if r.Method == http.MethodPost {
		if err := s.checkPost(r); err != nil {
			s.refuse(w, r, http.StatusForbidden, err.reason, err.msg)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// refusal is why a POST is refused.
type refusal struct{ reason, msg string }

// checkPost refuses a POST from another origin, without the CSRF token, or
// to a read-only inspector.
func (s *Server) checkPost(r *http.Request) *refusal {
	own := "http://" + r.Host
	origin, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
	switch {
	case site != "" && site != "same-origin" && site != "none":
		return &refusal{"CROSS_ORIGIN", fmt.Sprintf("This request comes from a %s page, not from the inspector's own, so it was refused.", site)}
	case origin == own, origin == "" && site != "":
	// Under Referrer-Policy: no-referrer a browser sends "Origin: null" with
	// a form of the inspector's own page; Sec-Fetch-Site says it is one.
	case origin == "null" && site == "same-origin":
	case origin == "":
		// No browser: a program holding the token, which the CSRF token
		// check below still applies to.
	default:
		return &refusal{"CROSS_ORIGIN", fmt.Sprintf("This request comes from %q, not from the inspector's own page (%s), so it was refused.", origin, own)}
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
		return &refusal{"BAD_CSRF_TOKEN", "This form lacks the inspector's CSRF token, so it was refused. Reload the page and submit it again."}
	}
	if s.opts.ReadOnly {
		return &refusal{"READ_ONLY", "This inspector was started with --read-only: it takes no action."}
	}
	return nil
}

// authorized says whether r passed the Host and token checks: a loopback
// Host, and the token as the cookie or the query parameter.
func (s *Server) authorized(r *http.Request) bool {
	if !loopbackHost(r.Host) {
		return false
	}
	if r.URL.Query().Has("token") {
		return s.validToken(r.URL.Query().Get("token"))
	}
	c, err := r.Cookie(cookieName(r.Host))
	return err == nil && s.validToken(c.Value)
}

func (s *Server) validToken(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.opts.Token)) == 1
}

// cookieName names the token cookie after the port: browsers do not
// separate the cookies of 127.0.0.1 by port, so two inspectors would
// otherwise overwrite each other's.
func cookieName(host string) string {
	_, port, err := net.SplitHostPort(host)
	if err != nil {
		port = "80"
	}
	return "savepoint_ui_" + port
}

// loopbackHost says whether a Host header names a loopback address.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	return isLoopback(h)
}

func isLoopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses a --listen address that is not HOST:PORT on loopback.
func CheckListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q is not HOST:PORT, such as 127.0.0.1:0.", addr)
	}
	if !isLoopback(host) {
		return fmt.Errorf("--listen %q is not a loopback address: the inspector listens only on 127.0.0.1, [::1] or localhost, since whoever reaches it with its token acts as you.", addr)
	}
	return nil
}
