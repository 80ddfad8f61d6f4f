package ui

import (
	"io/fs"
	"net/http"
)

// routes registers every page. GET pages only read; each action is a GET
// that shows its confirmation and a POST that takes it.
func (s *Server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/sessions", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /sessions", s.sessions)
	s.mux.HandleFunc("GET /sessions/{id}", s.session)
	s.mux.HandleFunc("GET /sessions/{id}/messages/{index}", s.message)
	s.mux.HandleFunc("GET /sessions/{id}/diff", s.diff)
	s.mux.HandleFunc("GET /sessions/{id}/export", s.export)
	s.mux.HandleFunc("GET /sessions/{id}/output", s.sessionOutput)
	s.mux.HandleFunc("GET /sessions/{id}/resolve", s.resolveForm)
	s.mux.HandleFunc("POST /sessions/{id}/resolve", s.resolvePost(false))
	s.mux.HandleFunc("GET /sessions/{id}/approve", s.approveForm(false))
	s.mux.HandleFunc("POST /sessions/{id}/approve", s.approvePost(false))
	s.mux.HandleFunc("GET /sessions/{id}/{action}", s.confirm)
	s.mux.HandleFunc("POST /sessions/{id}/{action}", s.act)
	s.mux.HandleFunc("GET /graph", s.threads)
	s.mux.HandleFunc("GET /graph/thread", s.thread)
	s.mux.HandleFunc("GET /graph/value", s.value)
	s.mux.HandleFunc("GET /graph/output", s.threadOutputPage)
	s.mux.HandleFunc("GET /graph/resolve", s.threadResolveForm)
	s.mux.HandleFunc("POST /graph/resolve", s.resolvePost(true))
	s.mux.HandleFunc("GET /graph/approve", s.approveForm(true))
	s.mux.HandleFunc("POST /graph/approve", s.approvePost(true))
	s.mux.HandleFunc("GET /graph/{action}", s.graphConfirm)
	s.mux.HandleFunc("POST /graph/{action}", s.graphAct)
	s.mux.HandleFunc("GET /server", s.server)
	s.mux.HandleFunc("GET /server/figures", s.figures)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.refuse(w, r, http.StatusNotFound, "NO_SUCH_PAGE", "The inspector has no page at "+r.URL.Path+".")
	})
}
