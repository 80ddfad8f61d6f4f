package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// LangGraph's savers as Targets: a Python process running
// client/python/bench/checkpointers.py holds the saver, and this process
// sends it one JSON request a line on its standard input and reads the
// answers, tagged with the request's id, from its standard output. Saves of
// different sessions are in flight together; the script times each aput
// itself, so a save's latency leaves the pipe out.

// pyProc is one running checkpointers.py.
type pyProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	pid    int

	mu      sync.Mutex // guards the fields below and writes to stdin
	next    int64
	waiting map[int64]chan pyAnswer
	dead    error // set when the process's output ended
}

// pyAnswer is one answer of the script.
type pyAnswer struct {
	ID       int64   `json:"id"`
	OK       bool    `json:"ok"`
	Error    string  `json:"error"`
	US       float64 `json:"us"`
	Messages int     `json:"messages"`
	PID      int     `json:"pid"`
}

// startPy starts script with python (a command line: the interpreter and
// its first arguments).
func startPy(python []string, script string) (*pyProc, error) {
	cmd := exec.Command(python[0], append(append([]string{}, python[1:]...), script)...)
	p := &pyProc{cmd: cmd, waiting: map[int64]chan pyAnswer{}}
	cmd.Stderr = &lockedWriter{w: &p.stderr, mu: &p.mu}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", script, err)
	}
	p.pid = cmd.Process.Pid
	go p.read(out)
	return p, nil
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *pyProc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var a pyAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			p.fail(fmt.Errorf("a line that is not an answer: %q", sc.Text()))
			return
		}
		p.mu.Lock()
		ch := p.waiting[a.ID]
		delete(p.waiting, a.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("its output ended")
	}
	p.fail(err)
}

// fail ends every call waiting and every later one with err.
func (p *pyProc) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = fmt.Errorf("the Python saver process: %w; its stderr:\n%s", err, tail(p.stderr.String(), 4000))
	}
	for id, ch := range p.waiting {
		ch <- pyAnswer{ID: id, Error: p.dead.Error()}
		delete(p.waiting, id)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call sends req (an object; its "id" is set here) and waits for its answer.
func (p *pyProc) call(ctx context.Context, req map[string]any) (pyAnswer, error) {
	ch := make(chan pyAnswer, 1)
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return pyAnswer{}, p.dead
	}
	p.next++
	id := p.next
	req["id"] = id
	line, err := json.Marshal(req)
	if err == nil {
		p.waiting[id] = ch
		_, err = p.stdin.Write(append(line, '\n'))
		if err != nil {
			delete(p.waiting, id)
		}
	}
	p.mu.Unlock()
	if err != nil {
		return pyAnswer{}, err
	}
	select {
	case a := <-ch:
		if !a.OK {
			return a, fmt.Errorf("%s: %s", req["op"], a.Error)
		}
		return a, nil
	case <-ctx.Done():
		return pyAnswer{}, ctx.Err()
	}
}

// Close ends the script (its standard input closed) and waits for it.
func (p *pyProc) Close() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the Python saver process: %w; its stderr:\n%s", err, tail(p.stderr.String(), 4000))
		}
		return nil
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		return errors.New("the Python saver process did not end within 60s of its input closing; killed")
	}
}

// pyTarget is one of LangGraph's savers: kind "sqlite" (AsyncSqliteSaver
// on a file in the store's directory) or "postgres" (AsyncPostgresSaver
// on a new database of pg, with a pool of pool connections).
type pyTarget struct {
	name   string
	kind   string
	proc   *pyProc
	pg     *pgServer // for "postgres"
	pool   int
	opens  int
	writes writeCounter // what the store's other processes wrote (PostgreSQL's)
}

func (t *pyTarget) Name() string { return t.name }

func (t *pyTarget) Open(ctx context.Context, dir string) (Store, error) {
	t.opens++
	where := filepath.Join(dir, "checkpoints.db")
	if t.kind == "postgres" {
		db := fmt.Sprintf("langgraph_%d", t.opens)
		if err := t.pg.createDatabase(ctx, db); err != nil {
			return nil, err
		}
		where = t.pg.url(db)
	}
	if _, err := t.proc.call(ctx, map[string]any{"op": "open", "kind": t.kind, "where": where, "pool": t.pool}); err != nil {
		return nil, err
	}
	return &pyStore{t: t, run: t.opens}, nil
}

type pyStore struct {
	t        *pyTarget
	run      int
	sessions atomic.Int64 // threads begun, for their names
}

func (s *pyStore) Session(ctx context.Context, i int) (Writer, error) {
	w := &pyWriter{s: s, i: i}
	return w, w.start(ctx)
}

// WriteBytes is what the store's server wrote (its writes counter), or
// without one what the Python process passed to write calls (SQLite
// writes its files with pwrite; the process's answers on its standard
// output, some 60 bytes each, are counted too).
func (s *pyStore) WriteBytes() (int64, error) {
	if s.t.writes != nil {
		return s.t.writes.WriteBytes()
	}
	return Proc{PID: s.t.proc.pid}.WriteChars()
}

// Resume puts msgs as one checkpoint of a new thread and times aget_tuple
// of it in the script.
func (s *pyStore) Resume(ctx context.Context, msgs []*savepointv1.Message) (time.Duration, error) {
	w := &pyWriter{s: s, i: -1}
	if err := w.start(ctx); err != nil {
		return 0, err
	}
	if err := w.Prefill(msgs[:len(msgs)-1]); err != nil {
		return 0, err
	}
	if err := w.Save(ctx, newSave(msgs[len(msgs)-1:], nil)); err != nil {
		return 0, err
	}
	a, err := s.t.proc.call(ctx, map[string]any{"op": "resume", "thread": w.thread})
	if err != nil {
		return 0, err
	}
	if a.Messages != len(msgs) {
		return 0, fmt.Errorf("resumed %d messages, want %d", a.Messages, len(msgs))
	}
	return time.Duration(a.US * float64(time.Microsecond)), nil
}

func (s *pyStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := s.t.proc.call(ctx, map[string]any{"op": "close"})
	return err
}

// pyWriter is one session: a LangGraph thread, a new one at each Restart.
type pyWriter struct {
	s      *pyStore
	i      int
	thread string
}

func (w *pyWriter) start(ctx context.Context) error {
	w.thread = fmt.Sprintf("bench-%d-%d-%d", w.s.run, w.i, w.s.sessions.Add(1))
	_, err := w.s.t.proc.call(ctx, map[string]any{"op": "session", "s": w.i, "thread": w.thread})
	return err
}

func (w *pyWriter) Restart(ctx context.Context) error { return w.start(ctx) }

func messagePairs(msgs []*savepointv1.Message) [][2]string {
	out := make([][2]string, len(msgs))
	for i, m := range msgs {
		out[i] = [2]string{m.GetRole(), m.GetContentJson()}
	}
	return out
}

func (w *pyWriter) Prefill(msgs []*savepointv1.Message) error {
	_, err := w.s.t.proc.call(context.Background(), map[string]any{"op": "prefill", "s": w.i, "messages": messagePairs(msgs)})
	return err
}

func (w *pyWriter) Save(ctx context.Context, s *Save) error {
	_, err := w.SaveTimed(ctx, s)
	return err
}

// SaveTimed is one aput of the thread's whole conversation with s's
// messages appended; the time is the script's, of the aput alone.
func (w *pyWriter) SaveTimed(ctx context.Context, s *Save) (time.Duration, error) {
	a, err := w.s.t.proc.call(ctx, map[string]any{"op": "save", "s": w.i, "messages": messagePairs(s.Messages)})
	if err != nil {
		return 0, err
	}
	return time.Duration(a.US * float64(time.Microsecond)), nil
}

// pgServer is a PostgreSQL server the benchmark started: its URLs and the
// write_bytes of its processes.
type pgServer struct {
	url func(db string) string
	// dataDir holds postmaster.pid, whose first line is the server's PID.
	dataDir string

	mu   sync.Mutex
	last map[int]int64 // write_bytes of each server process at the last reading
	sum  int64         // what they wrote since the first reading
}

func (s *pgServer) createDatabase(ctx context.Context, db string) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "CREATE DATABASE "+db)
	return err
}

// checkpoint runs CHECKPOINT: every dirty page written and synced now.
func (s *pgServer) checkpoint(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "CHECKPOINT")
	return err
}

// WriteBytes is what the postmaster and its children (backends, WAL
// writer, checkpointer, background writer) passed to write calls since the
// first call (wchar: PostgreSQL writes its WAL and data files with pwrite,
// never through a mapping; the replies a backend sends its client are
// counted too), counted per process between readings: a process that ended
// between two readings loses what it wrote after the first of them. Not
// write_bytes: this kernel counts a whole large folio each time PostgreSQL
// rewrites its partly filled 8 KiB WAL page after a sync, 256 KiB a commit
// (parseIOWriteBytes).
func (s *pgServer) WriteBytes() (int64, error) {
	b, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	pids, err := childrenOf(pm)
	if err != nil {
		return 0, err
	}
	now := map[int]int64{}
	for _, pid := range append(pids, pm) {
		n, err := Proc{PID: pid}.WriteChars()
		if err != nil {
			continue // ended since it was listed
		}
		now[pid] = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sum += addedWrites(s.last, now)
	s.last = now
	return s.sum, nil
}

// addedWrites is what the processes of now wrote since last: the growth of
// each one read both times, all of one new since (nothing when last is
// nil: the first reading is the baseline).
func addedWrites(last, now map[int]int64) int64 {
	if last == nil {
		return 0
	}
	var n int64
	for pid, v := range now {
		if l, ok := last[pid]; ok {
			n += max(v-l, 0)
		} else {
			n += v
		}
	}
	return n
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if ppid, ok := parseStatPPID(b); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out, nil
}

// parseStatPPID reads the parent's PID, the fourth field of /proc/PID/stat
// (the second, the command, is in parentheses and may hold spaces).
func parseStatPPID(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
