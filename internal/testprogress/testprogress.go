// Package testprogress turns the event stream of `go test -json` into the
// progress a person watching `make test` needs: a line when a package's
// tests start and when they finish, the output of every failed test, and,
// during long stretches with nothing finishing, which packages are still
// running.
package testprogress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

// Summary counts what a stream held; Failed is true when any package or test
// failed or the stream held a build failure.
type Summary struct {
	Passed, Failed, Skipped int
	Packages                int
	FailedPackages          []string
}

// OK reports whether nothing failed.
func (s Summary) OK() bool { return len(s.FailedPackages) == 0 && s.Failed == 0 }

// Formatter writes the progress of one `go test -json` stream; the zero
// value is not usable: make one with New.
type Formatter struct {
	out     io.Writer
	now     func() time.Time
	started map[string]time.Time // package -> when its tests started
	output  map[string][]string  // package or package/test -> its output lines
	sum     Summary
}

// New returns a Formatter that writes to out and reads the clock with now
// (time.Now when nil).
func New(out io.Writer, now func() time.Time) *Formatter {
	if now == nil {
		now = time.Now
	}
	return &Formatter{out: out, now: now, started: map[string]time.Time{}, output: map[string][]string{}}
}

// Line handles one line of the stream. A line that is not a JSON event
// (a build error printed as text) is written through unchanged.
func (f *Formatter) Line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		fmt.Fprintln(f.out, line)
		return
	}
	key := e.Package
	if e.ImportPath != "" {
		key = e.ImportPath
	} else if e.Test != "" {
		key += "/" + e.Test
	}
	switch e.Action {
	case "start":
		f.started[e.Package] = f.now()
		fmt.Fprintf(f.out, "start %s\n", e.Package)
	case "output", "build-output":
		f.output[key] = append(f.output[key], strings.TrimSuffix(e.Output, "\n"))
	case "build-fail":
		// The package's own fail event follows and counts it.
		f.flush(key, "build failed: "+e.ImportPath)
	case "pass", "skip", "fail":
		if e.Test != "" {
			f.test(e, key)
			return
		}
		f.pkg(e, key)
	}
}

func (f *Formatter) test(e event, key string) {
	switch e.Action {
	case "pass":
		f.sum.Passed++
	case "skip":
		f.sum.Skipped++
	case "fail":
		f.sum.Failed++
		f.flush(key, fmt.Sprintf("--- FAIL: %s %s (%.2fs)", e.Package, e.Test, e.Elapsed))
	}
	delete(f.output, key)
}

func (f *Formatter) pkg(e event, key string) {
	f.sum.Packages++
	delete(f.started, e.Package)
	lines := f.output[key]
	delete(f.output, key)
	switch {
	case e.Action == "fail":
		f.sum.FailedPackages = append(f.sum.FailedPackages, e.Package)
		for _, l := range lines {
			// go test's own verdict lines repeat what the next line says.
			if l != "FAIL" && !strings.HasPrefix(l, "FAIL\t") {
				fmt.Fprintln(f.out, "    "+l)
			}
		}
		fmt.Fprintf(f.out, "FAIL  %s (%.1fs)\n", e.Package, e.Elapsed)
	case e.Action == "skip":
		fmt.Fprintf(f.out, "none  %s (no tests)\n", e.Package)
	default:
		fmt.Fprintf(f.out, "ok    %s (%.1fs)\n", e.Package, e.Elapsed)
	}
}

// flush writes the output kept under key, after a heading when one is given.
func (f *Formatter) flush(key, heading string) {
	if heading != "" {
		fmt.Fprintln(f.out, heading)
	}
	for _, l := range f.output[key] {
		fmt.Fprintln(f.out, "    "+l)
	}
	delete(f.output, key)
}

// Running writes one line naming the packages still running and for how
// long, oldest first; it writes nothing when none are.
func (f *Formatter) Running() {
	if len(f.started) == 0 {
		return
	}
	now := f.now()
	pkgs := make([]string, 0, len(f.started))
	for p := range f.started {
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b string) int { return f.started[a].Compare(f.started[b]) })
	parts := make([]string, len(pkgs))
	for i, p := range pkgs {
		parts[i] = fmt.Sprintf("%s (%s)", p, now.Sub(f.started[p]).Truncate(time.Second))
	}
	fmt.Fprintf(f.out, "running %s\n", strings.Join(parts, ", "))
}

// Summary returns the counts so far.
func (f *Formatter) Summary() Summary { return f.sum }

// Run reads a whole stream from in, writing progress to out and, every
// interval, the packages still running (never when interval is zero). It returns the stream's Summary.
func Run(in io.Reader, out io.Writer, interval time.Duration) (Summary, error) {
	f := New(out, nil)
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		errc <- sc.Err()
		close(lines)
	}()
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				s := f.Summary()
				fmt.Fprintf(out, "%d packages, %d tests passed, %d failed, %d skipped\n",
					s.Packages, s.Passed, s.Failed, s.Skipped)
				if len(s.FailedPackages) > 0 {
					fmt.Fprintf(out, "failed: %s\n", strings.Join(s.FailedPackages, " "))
				}
				return s, <-errc
			}
			f.Line(l)
		case <-tick:
			f.Running()
		}
	}
}
