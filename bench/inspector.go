package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"os/exec"
	"strings"
	"time"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Scenario 5c: the web inspector over the 100,000-session store (issue
// 19): the Sessions page's time to first byte in both orders, and
// WatchSessions' delay from a save to its event.

// InspectorSummaryNames are scenario 5c's closing figures, printed when
// the inspector was measured (the savepoint CLI binary was found).
var InspectorSummaryNames = []string{
	"ui_sessions_ttfb_ms", // the Sessions page, first page ordered by last update, with 100,000 sessions: p50 time to first byte
	"watch_delay_ms",      // a save's call to its WatchSessions event, p50
}

// inspector measures the inspector against the running daemon d, which
// serves the start-up store; cli is the savepoint binary.
func (b *Bench) inspector(ctx context.Context, d *Daemon, cli string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "--addr", "unix:"+d.Socket, "ui", "--listen", "127.0.0.1:0")
	cmd.Env = daemonEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s ui: %w", cli, err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("%s ui printed no URL: %w", cli, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	if _, err := ttfb(ctx, hc, strings.TrimSpace(line)); err != nil { // sets the token cookie
		return err
	}
	base := strings.TrimSpace(line)
	base = base[:strings.Index(base[len("http://"):], "/")+len("http://")]
	reps := max(b.cfg.Reps*5, 15)
	t := &Table{
		Title:  fmt.Sprintf("5c. the web inspector over %d sessions (savepoint ui)", b.cfg.StartSessions),
		Header: []string{"what", "p50 ms", "min ms", "max ms"},
		Notes:  []string{fmt.Sprintf("Time to first byte of the Sessions page (50 rows) through savepoint ui on loopback, %d requests each, after one warm-up; the page reads one ListSessions page and renders it server-side. WatchSessions: the time from a SaveCheckpoint's call to the stream's event for that session (which includes the save itself: the event follows its durable commit), %d saves.", reps, reps)},
	}
	for _, p := range []struct{ what, path string }{
		{"Sessions page, by id", "/"},
		{"Sessions page, by last update", "/?order=updated"},
	} {
		if _, err := ttfb(ctx, hc, base+p.path); err != nil {
			return err
		}
		var took []float64
		for range reps {
			d, err := ttfb(ctx, hc, base+p.path)
			if err != nil {
				return err
			}
			took = append(took, ms(d))
		}
		t.Add(p.what, Median(took), minOf(took), maxOf(took))
		if p.path != "/" {
			b.summary["ui_sessions_ttfb_ms"] = Median(took)
		}
	}
	delays, err := watchDelays(ctx, d, reps)
	if err != nil {
		return err
	}
	t.Add("WatchSessions: save to event", Median(delays), minOf(delays), maxOf(delays))
	b.summary["watch_delay_ms"] = Median(delays)
	b.tables = append(b.tables, t)
	return nil
}

// ttfb GETs url and returns the time to its response's first byte, reading
// the body to its end; a status other than 200 is an error.
func ttfb(ctx context.Context, hc *http.Client, url string) (time.Duration, error) {
	var first time.Time
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotFirstResponseByte: func() { first = time.Now() },
	}), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return first.Sub(t0), nil
}

// watchDelays saves n times to one session while a WatchSessions stream is
// open and returns, per save, the milliseconds from the save's call to the
// event naming it at that revision (the daemon sends the event once the
// commit is durable, so it often arrives before the save's own answer).
func watchDelays(ctx context.Context, d *Daemon, n int) ([]float64, error) {
	conn, err := d.Dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := savepointv1.NewSavepointServiceClient(conn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.WatchSessions(ctx, &savepointv1.WatchSessionsRequest{})
	if err != nil {
		return nil, err
	}
	type event struct {
		rev uint64
		at  time.Time
	}
	// Every change durable after the stream's first response, a heartbeat,
	// is sent.
	if _, err := stream.Recv(); err != nil {
		return nil, fmt.Errorf("WatchSessions: %w", err)
	}
	id := "watch-" + uuid.NewString()[:8]
	events := make(chan event, 1024)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if s := m.GetSession(); s.GetSessionId() == id {
				events <- event{s.GetRevision(), time.Now()}
			}
		}
	}()
	var out []float64
	var rev uint64
	for range n {
		sent := time.Now()
		resp, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: id, ExpectedRevision: rev, RequestId: uuid.NewString(), Task: benchTask})
		if err != nil {
			return nil, err
		}
		rev = resp.GetRevision()
		for got := false; !got; {
			select {
			case e := <-events:
				if e.rev >= rev { // a burst may arrive as one event of the latest state
					out = append(out, ms(e.at.Sub(sent)))
					got = true
				}
			case err := <-errc:
				return nil, fmt.Errorf("WatchSessions: %w", err)
			case <-time.After(10 * time.Second):
				return nil, errors.New("WatchSessions sent no event for a save within 10 s")
			}
		}
	}
	return out, nil
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
