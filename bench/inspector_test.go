package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestTTFB(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(20 * time.Millisecond) // before the first byte
		w.Write([]byte("page"))
	}))
	defer srv.Close()
	d, err := ttfb(t.Context(), srv.Client(), srv.URL+"/")
	if err != nil || d < 20*time.Millisecond {
		t.Errorf("ttfb = %v, %v; want at least the handler's 20 ms", d, err)
	}
	if _, err := ttfb(t.Context(), srv.Client(), srv.URL+"/missing"); err == nil {
		t.Error("a 404 page was measured without an error")
	}
}
