package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The checkpointer comparison (`make bench-checkpointers`, -checkpointers):
// every checkpointer an agent loop could use, in one run and one table,
// with the same turns. It reuses the scenarios' instruments: timeSaves
// (latency), saveLoops (throughput), grow (history growth) and the stores'
// Resume.
//
// A turn appends one MessageBytes message to a session's conversation and
// saves it durably. Each checkpointer saves it as it works: savepointd
// appends the message (SaveCheckpoint), SQLite inserts the encoded request
// as a row, LangGraph's savers put a checkpoint whose messages channel holds
// the whole conversation, the seed's JSON file is rewritten whole.

// checkpointerSessions are the session counts of the comparison's throughput.
var checkpointerSessions = []int{1, 16, 64}

// conversationTurns caps a conversation in the latency and throughput
// runs: a session that has saved that many turns starts a new
// conversation, so that the stores that write the whole conversation at
// every turn are measured at the same lengths (1 to 50 turns) however long
// a run lasts.
const conversationTurns = 50

// cpFigures are one checkpointer's figures over the repetitions.
type cpFigures struct {
	p50, p99     []float64         // ms, per repetition
	lat          []time.Duration   // every timed save of every repetition, for the CDF
	rate         map[int][]float64 // turns per second by sessions, per repetition
	early, late  []float64         // bytes written per turn around turn 10 and the last turns
	resume       []float64         // ms
	resumeFailed string            // why a system could not resume, if it could not
}

func newCPFigures() *cpFigures { return &cpFigures{rate: map[int][]float64{}} }

// Checkpointers runs the comparison: savepointd on Badger and on
// PostgreSQL, SQLite, LangGraph's AsyncSqliteSaver and AsyncPostgresSaver
// (when -langgraph-python and -checkpointers-script are set) and the seed's
// JSON file, interleaved within each repetition, then prints one table and,
// with -plots, draws the latency CDF and throughput by sessions as PNGs.
func (b *Bench) Checkpointers(ctx context.Context) (err error) {
	var targets []Target
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()

	d, err := b.startDaemon(ctx)
	if err != nil {
		return err
	}
	closers = append(closers, d.Stop)
	targets = append(targets, deviceCounted(d, "cp", "savepointd (Badger)"))

	var pg *pgServer
	pgVer := ""
	if b.cfg.Postgres {
		srv, err := pgtest.StartDurable()
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		closers = append(closers, func() error { srv.Remove(); return nil })
		pg = &pgServer{url: func(db string) string { return srv.URL(db) }, dataDir: filepath.Join(srv.Dir, "data")}
		if err := pg.createDatabase(ctx, "savepointd"); err != nil {
			return err
		}
		dir, err := b.dir()
		if err != nil {
			return err
		}
		dp, err := StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(dir, "data"), dir, "--store-url", srv.URL("savepointd"))
		if err != nil {
			return err
		}
		closers = append(closers, dp.Stop)
		targets = append(targets, &savepointdTarget{d: dp, prefix: "cp", name: "savepointd (PostgreSQL)", store: pg})
		pgVer = pgVersion(ctx, srv.URL("postgres"))
	}
	targets = append(targets, sqliteTarget{})
	if b.cfg.LangGraphPython != "" && b.cfg.CheckpointersScript != "" {
		py, err := startPy([]string{b.cfg.LangGraphPython}, b.cfg.CheckpointersScript)
		if err != nil {
			return err
		}
		closers = append(closers, py.Close)
		targets = append(targets, &pyTarget{name: "LangGraph AsyncSqliteSaver", kind: "sqlite", proc: py})
		if pg != nil {
			targets = append(targets, &pyTarget{name: "LangGraph AsyncPostgresSaver", kind: "postgres", proc: py, pg: pg, pool: slices.Max(checkpointerSessions), writes: pg})
		}
	}
	targets = append(targets, jsonTarget{whole: true, seed: true})

	// The turns: latency's and throughput's single messages, growth's
	// history, resume's conversation.
	n := b.cfg.Cycles
	saves := make([]*Save, 2*(n+warmCycles))
	for i := range saves {
		saves[i] = newSave([]*savepointv1.Message{textMessage(b.rng, []string{"assistant", "user"}[i%2], b.cfg.MessageBytes)}, nil)
	}
	pool := saves[:64]
	history := make([]*Save, b.cfg.Turns)
	for i := range history {
		history[i] = newSave([]*savepointv1.Message{textMessage(b.rng, []string{"assistant", "user"}[i%2], b.cfg.MessageBytes)}, nil)
	}
	early, late := window{5, 15}, window{b.cfg.Turns - 10, b.cfg.Turns}
	resumeMsgs := make([]*savepointv1.Message, b.cfg.ResumeMessages)
	var resumeBytes int64
	for i := range resumeMsgs {
		resumeMsgs[i] = textMessage(b.rng, []string{"assistant", "user"}[i%2], b.cfg.MessageBytes)
		resumeBytes += int64(len(resumeMsgs[i].GetRole()) + len(resumeMsgs[i].GetContentJson()))
	}

	figs := map[string]*cpFigures{}
	var names []string
	for _, t := range targets {
		figs[t.Name()] = newCPFigures()
		names = append(names, t.Name())
	}
	// History growth first, for every repetition, on stores that have done
	// nothing else yet: the bytes of its windows are the most sensitive to
	// background work left by other runs (Badger's compactions, PostgreSQL's
	// checkpointer and background writer), and the PostgreSQL server, which
	// two rows share, is checkpointed before each run so that one row's
	// dirty pages are not counted as the next one's writes.
	for rep := range b.cfg.Reps {
		for _, t := range targets {
			if pg != nil {
				if err := pg.checkpoint(ctx); err != nil {
					return err
				}
			}
			e, l, err := b.grow(ctx, charsCounted(t), history, early, late)
			if err != nil {
				return fmt.Errorf("%s, history growth: %w", t.Name(), err)
			}
			f := figs[t.Name()]
			f.early, f.late = append(f.early, e.bytesPerSave), append(f.late, l.bytesPerSave)
		}
		b.log("checkpointers: history growth, repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	for rep := range b.cfg.Reps {
		for _, t := range targets {
			lat, err := b.timeSaves(ctx, conversations{t, conversationTurns}, saves)
			if err != nil {
				return fmt.Errorf("%s, latency: %w", t.Name(), err)
			}
			f := figs[t.Name()]
			f.p50 = append(f.p50, ms(Percentile(lat, 50)))
			f.p99 = append(f.p99, ms(Percentile(lat, 99)))
			f.lat = append(f.lat, lat...)
		}
		b.log("checkpointers: latency, repetition %d of %d done", rep+1, b.cfg.Reps)
		for _, ns := range checkpointerSessions {
			for _, t := range targets {
				r, err := b.saveLoops(ctx, conversations{t, conversationTurns}, ns, pool, nil)
				if err != nil {
					return fmt.Errorf("%s, %d sessions: %w", t.Name(), ns, err)
				}
				figs[t.Name()].rate[ns] = append(figs[t.Name()].rate[ns], r.rate)
			}
		}
		b.log("checkpointers: throughput, repetition %d of %d done", rep+1, b.cfg.Reps)
		for _, t := range targets {
			took, err := b.resumeTarget(ctx, t, resumeMsgs)
			if err != nil {
				return fmt.Errorf("%s, resume: %w", t.Name(), err)
			}
			figs[t.Name()].resume = append(figs[t.Name()].resume, ms(took))
		}
		b.log("checkpointers: resume, repetition %d of %d done", rep+1, b.cfg.Reps)
	}

	b.tables = append(b.tables, checkpointerTable(names, figs, cpSetting{
		MessageBytes: b.cfg.MessageBytes, Cycles: n, Reps: b.cfg.Reps, Window: b.cfg.Window, Warmup: b.cfg.Warmup,
		Turns: b.cfg.Turns, ResumeMessages: b.cfg.ResumeMessages, ResumeMiB: float64(resumeBytes) / mib, PostgresVersion: pgVer,
	}))
	if b.cfg.PlotDir != "" {
		if err := os.MkdirAll(b.cfg.PlotDir, 0o755); err != nil {
			return err
		}
		var cdf []cdfSeries
		var tput []tputSeries
		for _, name := range names {
			f := figs[name]
			cdf = append(cdf, cdfSeries{Name: name, Lat: f.lat})
			s := tputSeries{Name: name}
			for _, ns := range checkpointerSessions {
				s.Rate = append(s.Rate, Median(f.rate[ns]))
			}
			tput = append(tput, s)
		}
		if err := plotLatencyCDF(filepath.Join(b.cfg.PlotDir, "checkpointers-latency-cdf.png"), cdf); err != nil {
			return err
		}
		if err := plotThroughput(filepath.Join(b.cfg.PlotDir, "checkpointers-throughput.png"), checkpointerSessions, tput); err != nil {
			return err
		}
		b.log("checkpointers: plots written to %s", b.cfg.PlotDir)
	}
	return nil
}

// resumeTarget opens t in a new directory and times its Resume of msgs.
func (b *Bench) resumeTarget(ctx context.Context, t Target, msgs []*savepointv1.Message) (took time.Duration, err error) {
	dir, err := b.dir()
	if err != nil {
		return 0, err
	}
	st, err := t.Open(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.RemoveAll(dir)) }()
	r, ok := st.(resumer)
	if !ok {
		return 0, fmt.Errorf("%s cannot resume", t.Name())
	}
	return r.Resume(ctx, msgs)
}

// cpSetting is what the table's notes say about the run.
type cpSetting struct {
	MessageBytes, Cycles, Reps, Turns, ResumeMessages int
	Window, Warmup                                    time.Duration
	ResumeMiB                                         float64
	PostgresVersion                                   string
}

// checkpointerTable is the comparison's one table: a row per checkpointer,
// in names' order, each figure the median over repetitions.
func checkpointerTable(names []string, figs map[string]*cpFigures, s cpSetting) *Table {
	t := &Table{
		Title:  fmt.Sprintf("Checkpointers compared: a turn appends one %d-byte message and saves it durably", s.MessageBytes),
		Header: []string{"checkpointer", "save p50 ms", "save p99 ms"},
	}
	for _, n := range checkpointerSessions {
		if n == 1 {
			t.Header = append(t.Header, "turns/s, 1 session")
		} else {
			t.Header = append(t.Header, fmt.Sprintf("turns/s, %d", n))
		}
	}
	t.Header = append(t.Header, "KiB written per turn at turn 10", fmt.Sprintf("KiB written per turn at turn %d", s.Turns),
		fmt.Sprintf("resume %.0f MiB, ms", s.ResumeMiB))
	for _, name := range names {
		f := figs[name]
		row := []any{name, Median(f.p50), Median(f.p99)}
		for _, n := range checkpointerSessions {
			row = append(row, Median(f.rate[n]))
		}
		row = append(row, Median(f.early)/1024, Median(f.late)/1024, Median(f.resume))
		t.Add(row...)
	}
	pgv := s.PostgresVersion
	if pgv == "" {
		pgv = "(not run)"
	}
	t.Notes = []string{
		fmt.Sprintf("A turn: one %d-byte message (content_json, random letters) appended to the session's conversation and saved, the call returning when the store says it is durable. savepointd appends it (one SaveCheckpoint over its Unix socket, raw gRPC stubs from Go); SQLite inserts the encoded SaveCheckpointRequest as one row (WAL, synchronous=FULL, one connection for all sessions, from Go); LangGraph's savers take one aput of a checkpoint whose messages channel holds the whole conversation (LangGraph's default add_messages channel: a list stored whole at each new version), from one Python process; the seed's JSON file is rewritten whole (.tmp, fsync, rename, fsync of the directory; the seed itself does not fsync).", s.MessageBytes),
		fmt.Sprintf("Latency: %d turns in one session after %d warm-up turns, in conversations of %d turns (a new one begun, untimed, after each 50th turn), per repetition; LangGraph's aput timed in its Python process, the others in Go around the call. Throughput: 1, 16 and 64 sessions each saving turns as fast as it can, in conversations of %d turns (a new conversation's start counted in the time, not as a turn), %v counted after %v; the LangGraph savers serve every session from one Python process (asyncio tasks; AsyncPostgresSaver on a pool of 64 connections, AsyncSqliteSaver on its one connection).",
			2*s.Cycles, 2*warmCycles, conversationTurns, conversationTurns, s.Window, s.Warmup),
		fmt.Sprintf("Bytes written per turn, over turns 6-15 and %d-%d of one conversation of %d turns: what the checkpointer's processes passed to write calls (wchar of /proc/PID/io): PostgreSQL's postmaster and children (both PostgreSQL rows; the replies its backends send are counted too), the Python process (AsyncSqliteSaver), this process (SQLite, JSON); for savepointd (Badger), which writes Badger's files through memory maps and its log by rewriting a synced page, the sectors its data directory's block device wrote over the window, counted after a syncfs of that filesystem (every writer on the device is counted: the machine's other processes too); for savepointd (PostgreSQL), the daemon's own write_bytes (it writes nothing of the store) beside PostgreSQL's wchar. Not write_bytes for the others: this kernel counts a whole large folio (up to 2 MiB) each time a synced page is written again. The stores that write the whole conversation (LangGraph's, the JSON file) save turns 1-15, are handed turns 16-%d without writing them, and save the last ten; savepointd and SQLite save every turn. Growth runs first, on stores that did nothing else yet, PostgreSQL checkpointed before each row.",
			s.Turns-9, s.Turns, s.Turns, s.Turns-10),
		fmt.Sprintf("Resume: a conversation of %d messages (%.1f MiB of content), made untimed, read back whole: the Go client's Resume (savepointd), the rows of the session decoded (SQLite, stored in saves of 1,000 messages), aget_tuple (LangGraph, one checkpoint holding all of them), the file read and parsed (JSON).", s.ResumeMessages, s.ResumeMiB),
		fmt.Sprintf("PostgreSQL %s, started by pgtest with fsync=on, full_page_writes=on, synchronous_commit=on, on a Unix socket; savepointd --store-url and AsyncPostgresSaver use databases of their own on it. %d repetitions, checkpointers interleaved within each; every figure the median over repetitions.", pgv, s.Reps),
	}
	return t
}

// conversations is t with each session's conversation capped at turns
// saves: the next save first starts a new conversation (restarter), which
// timedSave leaves out of the save's time.
type conversations struct {
	Target
	turns int
}

func (c conversations) Open(ctx context.Context, dir string) (Store, error) {
	st, err := c.Target.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &convStore{Store: st, turns: c.turns, name: c.Name()}, nil
}

type convStore struct {
	Store
	turns int
	name  string
}

func (s *convStore) Session(ctx context.Context, i int) (Writer, error) {
	w, err := s.Store.Session(ctx, i)
	if err != nil {
		return nil, err
	}
	r, ok := w.(restarter)
	if !ok {
		return nil, fmt.Errorf("%s cannot start a new conversation", s.name)
	}
	return &convWriter{w: w, r: r, turns: s.turns}, nil
}

type convWriter struct {
	w     Writer
	r     restarter
	turns int
	saved int
}

func (w *convWriter) Save(ctx context.Context, s *Save) error {
	_, err := w.SaveTimed(ctx, s)
	return err
}

func (w *convWriter) SaveTimed(ctx context.Context, s *Save) (time.Duration, error) {
	if w.saved == w.turns {
		if err := w.r.Restart(ctx); err != nil {
			return 0, err
		}
		w.saved = 0
	}
	w.saved++
	return timedSave(ctx, w.w, s)
}

// charsCounted is t with its bytes written counted as this process's wchar
// when t writes from this process through write calls (SQLite, the JSON
// file), rather than the write_bytes grow counts by default, which counts a
// whole large folio for each rewrite of a synced page (parseIOWriteBytes).
func charsCounted(t Target) Target {
	switch t.(type) {
	case sqliteTarget, jsonTarget:
		return selfChars{t}
	}
	return t
}

type selfChars struct{ Target }

func (c selfChars) Open(ctx context.Context, dir string) (Store, error) {
	st, err := c.Target.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	return selfCharsStore{st}, nil
}

type selfCharsStore struct{ Store }

func (selfCharsStore) WriteBytes() (int64, error) { return Proc{}.WriteChars() }
