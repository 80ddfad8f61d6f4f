package main

// The baselines: the same durable write as a save, done in this process by
// (a) write + fdatasync, (b) Badger, (c) a JSON file, (d) SQLite.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

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

// (c) the seed's approach, durably: JSON to .tmp, fsync, rename, fsync dir

// jsonTarget writes a session's checkpoint as one JSON file, replaced
// atomically on every save. With whole set it rewrites the whole history
// each time, as a file-per-session store must; without, each file holds
// only the save's own messages (the same bytes as the other rows). With
// seed set (and whole), the file is the seed's checkpoint
// (../shared/seed: {version, task, turns, tokensUsed, messages,
// pendingToolUse}, indented as JSON.stringify(cp, null, 2) does), with the
// fsyncs the seed leaves out.
type jsonTarget struct{ whole, seed bool }

func (t jsonTarget) Name() string {
	if t.seed {
		return "JSON file (the seed's)"
	}
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
	return &jsonStore{whole: t.whole || t.seed, seed: t.seed, dirPath: dir, dir: d}, nil
}

type jsonStore struct {
	whole, seed bool
	dirPath     string
	dir         *os.File
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
	restarts int
}

// seedCheckpoint is the seed's checkpoint file (Lesson 6's saveCheckpoint).
type seedCheckpoint struct {
	Version        int               `json:"version"`
	Task           string            `json:"task"`
	Turns          uint64            `json:"turns"`
	TokensUsed     int               `json:"tokensUsed"`
	Messages       []json.RawMessage `json:"messages"`
	PendingToolUse json.RawMessage   `json:"pendingToolUse"`
}

// seedMessage is one message of the seed's history: its role and content
// blocks, here the one block of the message's content_json.
func seedMessage(m *savepointv1.Message) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}{m.GetRole(), json.RawMessage("[" + m.GetContentJson() + "]")})
	return b
}

// Prefill is prefill, for grow.
func (w *jsonWriter) Prefill(msgs []*savepointv1.Message) error {
	w.prefill(msgs)
	return nil
}

// Restart starts a new conversation in a new file.
func (w *jsonWriter) Restart(context.Context) error {
	w.restarts++
	base, _, _ := strings.Cut(w.id, "-c")
	w.id = fmt.Sprintf("%s-c%d", base, w.restarts)
	w.revision, w.history = 0, nil
	return nil
}

// encode is the file's content for a save of s.
func (w *jsonWriter) encode(s *Save, msgs []*savepointv1.Message) ([]byte, error) {
	if w.s.seed {
		cp := seedCheckpoint{Version: 1, Task: benchTask, Turns: w.revision, Messages: make([]json.RawMessage, len(msgs)), PendingToolUse: json.RawMessage("null")}
		for i, m := range msgs {
			cp.Messages[i] = seedMessage(m)
		}
		if len(s.Pending) > 0 {
			p := s.Pending[0]
			cp.PendingToolUse = json.RawMessage(fmt.Sprintf(`{"id":%q,"name":%q,"input":%s}`, p.GetToolUseId(), p.GetName(), p.GetInputJson()))
		}
		return json.MarshalIndent(cp, "", "  ")
	}
	cp := jsonCheckpoint{Session: w.id, Revision: w.revision, Messages: make([]jsonMessage, len(msgs))}
	for i, m := range msgs {
		cp.Messages[i] = jsonMessage{Role: m.GetRole(), Content: json.RawMessage(m.GetContentJson())}
	}
	for _, p := range s.Pending {
		cp.Pending = append(cp.Pending, json.RawMessage(fmt.Sprintf(`{"id":%q,"name":%q,"input":%s}`, p.GetToolUseId(), p.GetName(), p.GetInputJson())))
	}
	return json.Marshal(cp)
}

// Resume writes msgs as one checkpoint file and times reading it back as
// the seed's loadCheckpoint does: the file read and parsed whole.
func (s *jsonStore) Resume(ctx context.Context, msgs []*savepointv1.Message) (time.Duration, error) {
	w := &jsonWriter{s: s, id: "resume"}
	w.prefill(msgs[:len(msgs)-1])
	if err := w.Save(ctx, newSave(msgs[len(msgs)-1:], nil)); err != nil {
		return 0, err
	}
	t0 := time.Now()
	b, err := os.ReadFile(filepath.Join(s.dirPath, w.id+".json"))
	if err != nil {
		return 0, err
	}
	var cp struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if len(cp.Messages) != len(msgs) {
		return 0, fmt.Errorf("resumed %d messages, want %d", len(cp.Messages), len(msgs))
	}
	return took, nil
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
	b, err := w.encode(s, msgs)
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
	db       *sql.DB
	id       string
	rev      int64
	restarts int
}

// Restart starts a new conversation under a new session key.
func (w *sqliteWriter) Restart(context.Context) error {
	w.restarts++
	base, _, _ := strings.Cut(w.id, "-c")
	w.id, w.rev = fmt.Sprintf("%s-c%d", base, w.restarts), 0
	return nil
}

// Resume stores msgs as savepointd's resume session is built (saves of
// 1,000 messages, one row each) and times reading the session's rows back
// and decoding them.
func (s *sqliteStore) Resume(ctx context.Context, msgs []*savepointv1.Message) (time.Duration, error) {
	w := &sqliteWriter{db: s.db, id: "resume"}
	for i := 0; i < len(msgs); i += 1000 {
		if err := w.Save(ctx, newSave(msgs[i:min(i+1000, len(msgs))], nil)); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM checkpoints WHERE session = ? ORDER BY revision`, w.id)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return 0, err
		}
		var req savepointv1.SaveCheckpointRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			return 0, err
		}
		n += len(req.GetAppendMessages())
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if n != len(msgs) {
		return 0, fmt.Errorf("resumed %d messages, want %d", n, len(msgs))
	}
	return took, nil
}

func (w *sqliteWriter) Save(ctx context.Context, s *Save) error {
	w.rev++
	_, err := w.db.ExecContext(ctx, `INSERT INTO checkpoints (session, revision, data) VALUES (?, ?, ?)`, w.id, w.rev, s.Bytes)
	return err
}
