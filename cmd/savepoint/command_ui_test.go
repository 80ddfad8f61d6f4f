package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// startUI runs savepoint ui with args until the test ends and returns the
// URL it printed and a function that interrupts it and returns its exit
// code.
func startUI(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb daemontest.SyncBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, append([]string{"ui"}, args...), &out, &errb) }()
	urlRE := regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[A-Z0-9]+\n$`)
	deadline := time.Now().Add(10 * time.Second)
	for !urlRE.MatchString(out.String()) {
		select {
		case c := <-code:
			t.Fatalf("savepoint ui exited %d: stdout %q, stderr %q", c, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("savepoint ui printed no URL line in 10s: stdout %q, stderr %q", out.String(), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop := sync.OnceValue(func() int { cancel(); return <-code })
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(out.String()), stop
}

// TestUIServesPastItsTimeout: --timeout bounds each RPC of savepoint ui, not
// the command; the printed URL is the only line on stdout and lets a
// browser in; an interrupt stops it with exit 0.
func TestUIServesPastItsTimeout(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	seed(t, d.Client)
	url, stop := startUI(t, "--addr", "unix:"+d.Socket, "--timeout", "300ms")
	time.Sleep(700 * time.Millisecond)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.RawQuery != "" || !strings.Contains(string(body), "report-1") {
		t.Errorf("GET %s after the timeout: %d at %s\n%s", url, resp.StatusCode, resp.Request.URL, body)
	}
	if c := stop(); c != exitOK {
		t.Errorf("interrupted savepoint ui exited %d, want 0", c)
	}
}

func TestUIRefusesNonLoopbackListen(t *testing.T) {
	for _, l := range []string{"0.0.0.0:0", "192.0.2.1:8080", ":0"} {
		r := runCLI(t, "ui", "--addr", "unix:/nonexistent/s.sock", "--listen", l)
		if r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") || r.stdout != "" {
			t.Errorf("--listen %s: %+v, want exit %d saying it is not loopback", l, r, exitUsage)
		}
	}
}

// TestUIOpen: --open starts $BROWSER on a 0600 redirect file holding the
// URL; the browser's command line holds the file, never the token, and the
// file is gone once the inspector stops.
func TestUIOpen(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	dir := t.TempDir()
	script := filepath.Join(dir, "browser")
	argsFile := filepath.Join(dir, "args")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > "+argsFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)
	url, stop := startUI(t, "--addr", "unix:"+d.Socket, "--open")
	var args []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(argsFile); err == nil && len(b) > 0 {
			args = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("$BROWSER was not started")
		}
	}
	token := url[strings.Index(url, "token=")+len("token="):]
	path, ok := strings.CutPrefix(strings.TrimSpace(string(args)), "file://")
	if !ok || strings.Contains(string(args), token) {
		t.Fatalf("the browser was started with %q, want file://PATH without the token", args)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("redirect file %s: %v %v, want mode 0600", path, fi.Mode(), err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), url) {
		t.Errorf("the redirect file does not send the browser to %s:\n%s", url, b)
	}
	if c := stop(); c != exitOK {
		t.Errorf("exit %d", c)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the redirect file outlived the inspector: %v", err)
	}
}
