package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// PostgresSummaryNames are the closing figures of the PostgreSQL rows
// (issue 14), printed after SummaryNames when they ran. A ratio is
// savepointd's (--store-url) figure over plain SQL inserts from Go's.
var PostgresSummaryNames = []string{
	"postgres_save_p50_vs_sql",     // one-session save p50 (below 1: savepointd faster)
	"postgres_throughput64_vs_sql", // saves per second at 64 sessions (above 1: savepointd faster)
	"postgres_save_p50_vs_floor",   // one-session save p50 / (empty RPC p50 + plain INSERT p50) (issue 38)
}

// Postgres starts a PostgreSQL server with fsync on (pgtest.StartDurable)
// and measures savepointd serving it against the same saves written as
// plain SQL inserts from this process: scenario 1's one-session latency
// and scenario 2's throughput at 64 sessions.
func (b *Bench) Postgres(ctx context.Context) (err error) {
	srv, err := pgtest.StartDurable()
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer srv.Remove()
	dir, err := b.dir()
	if err != nil {
		return err
	}
	d, err := StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(dir, "data"), dir, "--store-url", srv.URL("postgres"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Stop()) }()
	spd := &savepointdTarget{d: d, prefix: "pg"}
	sql := &sqlTarget{url: srv.URL("postgres")}
	empty := emptyRPCTarget{d: d}
	targets := []Target{spd, sql}

	n := b.cfg.Cycles
	saves := make([]*Save, 0, 2*(n+warmCycles))
	for i := range n + warmCycles {
		saves = append(saves, b.pointA(i), b.pointB())
	}
	pool := make([]*Save, 64)
	for i := range pool {
		pool[i] = newSave([]*savepointv1.Message{textMessage(b.rng, "assistant", b.cfg.MessageBytes)}, nil)
	}
	p50, p99, rate := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for rep := range b.cfg.Reps {
		for _, t := range targets {
			lat, err := b.timeSaves(ctx, t, saves)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			p50[t.Name()] = append(p50[t.Name()], ms(Percentile(lat, 50)))
			p99[t.Name()] = append(p99[t.Name()], ms(Percentile(lat, 99)))
			if t == spd { // the round trip alone, on the same daemon, for the floor
				lat, err := b.timeSaves(ctx, empty, saves)
				if err != nil {
					return fmt.Errorf("%s: %w", empty.Name(), err)
				}
				p50[empty.Name()] = append(p50[empty.Name()], ms(Percentile(lat, 50)))
			}
			r, err := b.saveLoops(ctx, t, 64, pool, nil)
			if err != nil {
				return fmt.Errorf("%s, 64 sessions: %w", t.Name(), err)
			}
			rate[t.Name()] = append(rate[t.Name()], r.rate)
		}
		b.log("PostgreSQL: repetition %d of %d done", rep+1, b.cfg.Reps)
	}
	sp, sq := spd.Name()+" --store-url", sql.Name()
	tab := &Table{
		Title:  "7. PostgreSQL: savepointd --store-url against plain SQL inserts",
		Header: []string{"system", "save p50 ms", "save p99 ms", "saves/s, 64 sessions", "p50 / sql", "saves/s / sql", "p50 / floor"},
		Notes: []string{
			fmt.Sprintf("PostgreSQL %s started by pgtest on a Unix socket with fsync=on, full_page_writes=on, synchronous_commit=on; savepointd and the SQL writers reach it over that socket.", pgVersion(ctx, srv.URL("postgres"))),
			fmt.Sprintf("Latency: scenario 1's %d saves (Point A + Point B) in one session after %d warm-up cycles; throughput: scenario 2's loops of one %d-byte message at 64 sessions, %v counted after %v; %d repetitions, systems interleaved; medians, ratios medians of per-repetition ratios.",
				2*n, warmCycles, b.cfg.MessageBytes, b.cfg.Window, b.cfg.Warmup, b.cfg.Reps),
			"Floor: the empty RPC (grpc.health.v1 Check on the same daemon) p50 plus sql's p50, summed per repetition: a round trip to savepointd and the cheapest durable insert.",
			"sql: each save one INSERT of the encoded SaveCheckpointRequest (session id, sequence number, bytea) in its own transaction, from Go with pgx, one connection per session: the database's floor for a durable save, without savepointd's records, checks or group commit.",
		},
	}
	floor := Sum(p50[empty.Name()], p50[sq])
	tab.Add(sp, Median(p50[spd.Name()]), Median(p99[spd.Name()]), Median(rate[spd.Name()]),
		MedianRatio(p50[spd.Name()], p50[sq]), MedianRatio(rate[spd.Name()], rate[sq]), MedianRatio(p50[spd.Name()], floor))
	tab.Add(sq, Median(p50[sq]), Median(p99[sq]), Median(rate[sq]), 1.0, 1.0, "")
	tab.Add(empty.Name(), Median(p50[empty.Name()]), "", "", "", "", "")
	b.tables = append(b.tables, tab)
	b.summary["postgres_save_p50_vs_sql"] = MedianRatio(p50[spd.Name()], p50[sq])
	b.summary["postgres_throughput64_vs_sql"] = MedianRatio(rate[spd.Name()], rate[sq])
	b.summary["postgres_save_p50_vs_floor"] = MedianRatio(p50[spd.Name()], Sum(p50[empty.Name()], p50[sq]))
	return nil
}

func pgVersion(ctx context.Context, url string) string {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return "(version unknown)"
	}
	defer c.Close(context.Background())
	var v string
	if c.QueryRow(ctx, "SHOW server_version").Scan(&v) != nil {
		return "(version unknown)"
	}
	return v
}

// sqlTarget writes each save as one INSERT in its own transaction (pgx,
// autocommit), one connection per session, into a table of its own.
type sqlTarget struct {
	url   string
	opens int
}

func (t *sqlTarget) Name() string { return "sql" }

func (t *sqlTarget) Open(ctx context.Context, _ string) (Store, error) {
	t.opens++
	c, err := pgx.Connect(ctx, t.url)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	table := fmt.Sprintf("bench_saves_%d", t.opens)
	if _, err := c.Exec(ctx, "CREATE TABLE "+table+" (session_id TEXT NOT NULL, seq BIGINT NOT NULL, record BYTEA NOT NULL, PRIMARY KEY (session_id, seq))"); err != nil {
		return nil, err
	}
	return &sqlStore{url: t.url, table: table}, nil
}

type sqlStore struct {
	url   string
	table string
	conns []*pgx.Conn
}

func (s *sqlStore) Session(ctx context.Context, i int) (Writer, error) {
	c, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, c)
	return &sqlWriter{c: c, sql: "INSERT INTO " + s.table + " (session_id, seq, record) VALUES ($1, $2, $3)", id: fmt.Sprint("s", i)}, nil
}

func (s *sqlStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Close(ctx))
	}
	return errors.Join(errs...)
}

type sqlWriter struct {
	c   *pgx.Conn
	sql string
	id  string
	seq int64
}

func (w *sqlWriter) Save(ctx context.Context, s *Save) error {
	w.seq++
	_, err := w.c.Exec(ctx, w.sql, w.id, w.seq, s.Bytes)
	return err
}
