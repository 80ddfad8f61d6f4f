package ui

import (
	"errors"
	"fmt"
	"html/template"
	"os"
	"os/exec"
	"strings"
)

var redirectPage = template.Must(template.New("redirect").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0;url={{.}}">
<title>savepoint ui</title></head>
<body><p>Opening the inspector: <a href="{{.}}">continue</a>.</p></body></html>
`))

// WriteRedirectFile writes, in dir (empty: the system's temporary
// directory), an HTML file readable by its owner only (0600) that sends the
// browser on to url, and returns its path. Jupyter opens its browser this
// way so that the token is never on the browser's command line, which every
// local user can read in /proc. The caller removes the file.
func WriteRedirectFile(dir, url string) (string, error) {
	f, err := os.CreateTemp(dir, "savepoint-ui-*.html") // mode 0600
	if err != nil {
		return "", fmt.Errorf("writing the browser's redirect file: %w.", err)
	}
	if err := f.Chmod(0o600); err == nil {
		err = redirectPage.Execute(f, url)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing the browser's redirect file: %w.", err)
	}
	return f.Name(), nil
}

// BrowserCommand returns the command that opens file path in the desktop's
// browser: $BROWSER (its first word the program, as xdg-open reads it),
// else xdg-open, else open (macOS). Its arguments hold the file's URL only,
// never the token. getenv and lookPath are os.Getenv and exec.LookPath
// outside tests.
func BrowserCommand(path string, getenv func(string) string, lookPath func(string) (string, error)) (*exec.Cmd, error) {
	target := "file://" + path
	if b := strings.Fields(getenv("BROWSER")); len(b) > 0 {
		if p, err := lookPath(b[0]); err == nil {
			return exec.Command(p, append(b[1:], target)...), nil
		}
	}
	for _, name := range []string{"xdg-open", "open"} {
		if p, err := lookPath(name); err == nil {
			return exec.Command(p, target), nil
		}
	}
	return nil, errors.New("no browser to open: $BROWSER is unset and neither xdg-open nor open is on the PATH; open the printed URL by hand.")
}
