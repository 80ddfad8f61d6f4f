package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// latencyBaselines are the rows of scenario 1 after savepointd, and
// throughputBaselines those of scenario 2. A later row (LangGraph's saver
// driven from a Python script, a PostgreSQL table) is one more Target added
// here: the scenarios time and tabulate every Target alike.
func latencyBaselines() []Target {
	return []Target{fsyncTarget{}, badgerTarget{}, jsonTarget{}, sqliteTarget{}}
}

func throughputBaselines() []Target { return []Target{badgerTarget{}, sqliteTarget{}} }

// A Target is a system a checkpoint can be saved to: savepointd, or a
// baseline doing the same durable write. Open may start a process (a
// Python script, a database server) and its Writers talk to it.
type Target interface {
	// Name is the row's name in the tables.
	Name() string
	// Open prepares a fresh store in dir, an empty directory the caller
	// removes. The caller closes the Store.
	Open(ctx context.Context, dir string) (Store, error)
}

// A Store is an open Target.
type Store interface {
	// Session prepares session i (creating it is not timed) and returns its
	// writer. Writers of different sessions are used concurrently, each by
	// one goroutine.
	Session(ctx context.Context, i int) (Writer, error)
	// Close releases the store and every writer.
	Close() error
}

// A Writer saves one session's checkpoints.
type Writer interface {
	// Save makes s durable, returning when it is.
	Save(ctx context.Context, s *Save) error
}

// Save is one checkpoint: the messages it appends, the tool uses it leaves
// pending, and Bytes, the SaveCheckpointRequest as savepointd receives it,
// which is what a baseline writes ("the same bytes").
type Save struct {
	Messages []*savepointv1.Message
	Pending  []*savepointv1.ToolUse
	Bytes    []byte
}

// newSave builds a save of msgs and pending; its Bytes encode the request
// of session "bench-session" at turn 1.
func newSave(msgs []*savepointv1.Message, pending []*savepointv1.ToolUse) *Save {
	req := &savepointv1.SaveCheckpointRequest{
		SessionId: "bench-session", ExpectedRevision: 1, Epoch: 1, RequestId: uuid.NewString(),
		Task: benchTask, Turn: 1, AppendMessages: msgs, PendingToolUses: pending,
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err) // a request of valid strings always encodes
	}
	return &Save{Messages: msgs, Pending: pending, Bytes: b}
}

const benchTask = "savepoint-bench"

// filler returns n bytes of random letters: text that does not compress
// away, as a real message would not.
func filler(rng *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// textMessage is a message whose content_json is size bytes.
func textMessage(rng *rand.Rand, role string, size int) *savepointv1.Message {
	const env = `{"type":"text","text":""}`
	return &savepointv1.Message{Role: role, ContentJson: `{"type":"text","text":"` + filler(rng, max(size-len(env), 0)) + `"}`}
}

// ---------------------------------------------------------------------------
// savepointd

// savepointdTarget saves through a running savepointd over its Unix socket,
// one gRPC connection per session (each agent loop is its own process),
// with the raw generated stubs. Open does not start the daemon: scenarios
// share one daemon so its footprint can be read.
type savepointdTarget struct {
	d      *Daemon
	prefix string // makes session ids unique across Opens on one daemon
	opens  int
}

func (t *savepointdTarget) Name() string { return "savepointd" }

func (t *savepointdTarget) Open(ctx context.Context, _ string) (Store, error) {
	t.opens++
	return &savepointdStore{t: t, run: fmt.Sprintf("%s-%d", t.prefix, t.opens)}, nil
}

type savepointdStore struct {
	t     *savepointdTarget
	run   string
	conns []*grpc.ClientConn
}

func (s *savepointdStore) Session(ctx context.Context, i int) (Writer, error) {
	conn, err := s.t.d.Dial()
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, conn)
	w := &savepointdWriter{c: savepointv1.NewSavepointServiceClient(conn), id: fmt.Sprintf("bench-%s-%d", s.run, i)}
	resp, err := w.c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: w.id, RequestId: uuid.NewString(), Task: benchTask})
	if err != nil {
		return nil, fmt.Errorf("creating session %s: %w", w.id, err)
	}
	w.rev, w.epoch = resp.GetRevision(), resp.GetEpoch()
	return w, nil
}

func (s *savepointdStore) Close() error {
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type savepointdWriter struct {
	c          savepointv1.SavepointServiceClient
	id         string
	rev, epoch uint64
	turn       uint32
}

func (w *savepointdWriter) Save(ctx context.Context, s *Save) error {
	if len(s.Pending) > 0 || w.turn == 0 {
		w.turn++ // a turn begins with Point A
	}
	resp, err := w.c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: w.id, ExpectedRevision: w.rev, Epoch: w.epoch, RequestId: uuid.NewString(),
		Task: benchTask, Turn: w.turn, AppendMessages: s.Messages, PendingToolUses: s.Pending,
	})
	if err != nil {
		return fmt.Errorf("SaveCheckpoint %s at revision %d: %w", w.id, w.rev, err)
	}
	w.rev = resp.GetRevision()
	return nil
}

// ---------------------------------------------------------------------------
// (a) write + fdatasync: the physical floor

// fsyncTarget writes each save's bytes at the next offset of a file whose
// blocks were written and synced beforehand, then fdatasyncs: a data write
// and its flush, with no metadata to commit. One session only.
type fsyncTarget struct{}

const fsyncFileBytes = 64 << 20

func (fsyncTarget) Name() string { return "write+fdatasync" }

func (fsyncTarget) Open(ctx context.Context, dir string) (Store, error) {
	f, err := os.OpenFile(filepath.Join(dir, "floor.log"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(make([]byte, fsyncFileBytes)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return &fsyncStore{f: f}, nil
}

type fsyncStore struct {
	f   *os.File
	off int64
	one bool
}

func (s *fsyncStore) Session(context.Context, int) (Writer, error) {
	if s.one {
		return nil, errors.New("write+fdatasync: one session only")
	}
	s.one = true
	return s, nil
}

func (s *fsyncStore) Save(_ context.Context, sv *Save) error {
	if s.off+int64(len(sv.Bytes)) > fsyncFileBytes {
		s.off = 0 // wrap around: the blocks stay allocated
	}
	if _, err := s.f.WriteAt(sv.Bytes, s.off); err != nil {
		return err
	}
	s.off += int64(len(sv.Bytes))
	return fdatasync(s.f)
}

func (s *fsyncStore) Close() error { return s.f.Close() }

// ---------------------------------------------------------------------------
// (b) one embedded Badger transaction per save, SyncWrites

// badgerTarget stores each save's bytes under its own key in one
// transaction of an embedded Badger opened with its defaults and
// SyncWrites, as an agent embedding Badger would.
type badgerTarget struct{}

func (badgerTarget) Name() string { return "badger txn (SyncWrites)" }

func (badgerTarget) Open(ctx context.Context, dir string) (Store, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		return nil, err
	}
	return &badgerStore{db: db}, nil
}

type badgerStore struct{ db *badger.DB }

func (s *badgerStore) Session(_ context.Context, i int) (Writer, error) {
	return &badgerWriter{db: s.db, prefix: fmt.Appendf(nil, "s/%d/", i)}, nil
}

func (s *badgerStore) Close() error { return s.db.Close() }

type badgerWriter struct {
	db     *badger.DB
	prefix []byte
	rev    uint64
}

func (w *badgerWriter) Save(_ context.Context, s *Save) error {
	w.rev++
	key := binary.BigEndian.AppendUint64(append([]byte(nil), w.prefix...), w.rev)
	return w.db.Update(func(txn *badger.Txn) error { return txn.Set(key, s.Bytes) })
}

// ---------------------------------------------------------------------------
// (c) the seed's approach, durably: JSON to .tmp, fsync, rename, fsync dir

// jsonTarget writes a session's checkpoint as one JSON file, replaced
// atomically on every save. With whole set it rewrites the whole history
// each time, as a file-per-session store must; without, each file holds
// only the save's own messages (the same bytes as the other rows).
type jsonTarget struct{ whole bool }

func (t jsonTarget) Name() string {
	if t.whole {
		return "JSON file, whole history"
	}
	return "JSON file (.tmp, fsync, rename, fsync dir)"
}

func (t jsonTarget) Open(ctx context.Context, dir string) (Store, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &jsonStore{whole: t.whole, dirPath: dir, dir: d}, nil
}

type jsonStore struct {
	whole   bool
	dirPath string
	dir     *os.File
}

func (s *jsonStore) Session(_ context.Context, i int) (Writer, error) {
	return &jsonWriter{s: s, id: fmt.Sprintf("session-%d", i)}, nil
}

func (s *jsonStore) Close() error { return s.dir.Close() }

type jsonWriter struct {
	s        *jsonStore
	id       string
	revision uint64
	history  []*savepointv1.Message
}

// jsonCheckpoint is the file's content.
type jsonCheckpoint struct {
	Session  string            `json:"session"`
	Revision uint64            `json:"revision"`
	Messages []jsonMessage     `json:"messages"`
	Pending  []json.RawMessage `json:"pending,omitempty"`
}

type jsonMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// prefill sets the history without writing, to start a long session fast.
func (w *jsonWriter) prefill(msgs []*savepointv1.Message) {
	w.history = append(w.history, msgs...)
	w.revision += uint64(len(msgs))
}

func (w *jsonWriter) Save(_ context.Context, s *Save) error {
	w.revision++
	msgs := s.Messages
	if w.s.whole {
		w.history = append(w.history, s.Messages...)
		msgs = w.history
	}
	cp := jsonCheckpoint{Session: w.id, Revision: w.revision, Messages: make([]jsonMessage, len(msgs))}
	for i, m := range msgs {
		cp.Messages[i] = jsonMessage{Role: m.GetRole(), Content: json.RawMessage(m.GetContentJson())}
	}
	for _, p := range s.Pending {
		cp.Pending = append(cp.Pending, json.RawMessage(fmt.Sprintf(`{"id":%q,"name":%q,"input":%s}`, p.GetToolUseId(), p.GetName(), p.GetInputJson())))
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	path := filepath.Join(w.s.dirPath, w.id+".json")
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return w.s.dir.Sync()
}

// ---------------------------------------------------------------------------
// (d) SQLite, WAL, synchronous=FULL, one row per checkpoint

// sqliteTarget inserts each save's bytes as one row, each INSERT its own
// transaction, in SQLite with journal_mode=WAL and synchronous=FULL, through
// one connection shared by every session (SQLite has one writer at a time;
// LangGraph's SqliteSaver also serializes on one connection).
type sqliteTarget struct{}

func (sqliteTarget) Name() string { return "SQLite WAL synchronous=FULL" }

func (sqliteTarget) Open(ctx context.Context, dir string) (Store, error) {
	dsn := "file:" + filepath.Join(dir, "checkpoints.db") + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := checkSQLite(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE checkpoints (session TEXT NOT NULL, revision INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (session, revision))`); err != nil {
		db.Close()
		return nil, err
	}
	return &sqliteStore{db: db}, nil
}

// checkSQLite confirms the pragmas took: a benchmark of the wrong mode would
// measure nothing.
func checkSQLite(ctx context.Context, db *sql.DB) error {
	var mode string
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return err
	}
	if mode != "wal" || sync != 2 {
		return fmt.Errorf("sqlite: journal_mode %q, synchronous %d; want wal and 2 (FULL)", mode, sync)
	}
	return nil
}

type sqliteStore struct{ db *sql.DB }

func (s *sqliteStore) Session(_ context.Context, i int) (Writer, error) {
	return &sqliteWriter{db: s.db, id: fmt.Sprintf("session-%d", i)}, nil
}

func (s *sqliteStore) Close() error { return s.db.Close() }

type sqliteWriter struct {
	db  *sql.DB
	id  string
	rev int64
}

func (w *sqliteWriter) Save(ctx context.Context, s *Save) error {
	w.rev++
	_, err := w.db.ExecContext(ctx, `INSERT INTO checkpoints (session, revision, data) VALUES (?, ?, ?)`, w.id, w.rev, s.Bytes)
	return err
}
