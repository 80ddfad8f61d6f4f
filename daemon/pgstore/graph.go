package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ core.GraphStore = (*Store)(nil)

// The graph checkpoint service's tables (schema version 3). Every key
// column is bytea, so that ids sort by their bytes as in the embedded store.
// A row's checksum covers its table, its key within the thread, its record
// and its data; the thread id is left out so that CopyThread copies rows in
// SQL, so a row moved to another thread is not detected. Each write is one
// transaction that first locks the thread's row (SELECT ... FOR UPDATE), so
// that writes to a thread, on one host or several, are serialized and never
// a read-then-write race. PutCheckpoint and PutWrites join the sessions'
// group commit (graphWrite); an upload's commit, a delete, a copy and a
// prune, which may be large, run in their own transactions (graphTx). PostgreSQL has no transaction size limit like the
// embedded engine's: a delete, copy or prune of a thread is one transaction
// (bounded by the statement timeout per statement), atomic for readers.
var graphMigration = []string{
	`CREATE TABLE {graph_threads} (
		thread_id BYTEA PRIMARY KEY,
		record    BYTEA NOT NULL,
		checksum  BIGINT NOT NULL)`,
	`CREATE TABLE {graph_checkpoints} (
		thread_id     BYTEA NOT NULL,
		ns            BYTEA NOT NULL,
		checkpoint_id BYTEA NOT NULL,
		run_id        BYTEA,
		record        BYTEA NOT NULL,
		data          BYTEA NOT NULL,
		checksum      BIGINT NOT NULL,
		PRIMARY KEY (thread_id, ns, checkpoint_id))`,
	`CREATE INDEX ON {graph_checkpoints} (run_id) WHERE run_id IS NOT NULL`,
	`CREATE INDEX ON {graph_checkpoints} (checkpoint_id)`,
	`CREATE TABLE {graph_blobs} (
		thread_id BYTEA NOT NULL,
		ns        BYTEA NOT NULL,
		channel   BYTEA NOT NULL,
		version   BYTEA NOT NULL,
		record    BYTEA NOT NULL,
		data      BYTEA NOT NULL,
		checksum  BIGINT NOT NULL,
		PRIMARY KEY (thread_id, ns, channel, version))`,
	`CREATE TABLE {graph_writes} (
		thread_id     BYTEA NOT NULL,
		ns            BYTEA NOT NULL,
		checkpoint_id BYTEA NOT NULL,
		task_id       BYTEA NOT NULL,
		idx           INT NOT NULL,
		record        BYTEA NOT NULL,
		data          BYTEA NOT NULL,
		checksum      BIGINT NOT NULL,
		PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, idx))`,
	`CREATE TABLE {graph_requests} (
		thread_id  BYTEA NOT NULL,
		request_id BYTEA NOT NULL,
		record     BYTEA NOT NULL,
		checksum   BIGINT NOT NULL,
		PRIMARY KEY (thread_id, request_id))`,
	`CREATE TABLE {graph_uploads} (
		upload_id  BYTEA PRIMARY KEY,
		thread_id  BYTEA NOT NULL,
		start_time TIMESTAMPTZ NOT NULL DEFAULT now())`,
	`CREATE INDEX ON {graph_uploads} (thread_id)`,
	`CREATE TABLE {graph_upload_chunks} (
		upload_id BYTEA NOT NULL REFERENCES {graph_uploads} ON DELETE CASCADE,
		value     INT NOT NULL,
		seq       INT NOT NULL,
		data      BYTEA NOT NULL,
		PRIMARY KEY (upload_id, value, seq))`,
}

// graphTables are the graph tables; graphDataTables those a thread's delete
// empties and Verify reads (staged uploads are neither).
var (
	graphTables     = []string{"graph_threads", "graph_checkpoints", "graph_blobs", "graph_writes", "graph_requests", "graph_uploads", "graph_upload_chunks", "graph_effects"}
	graphDataTables = []string{"graph_checkpoints", "graph_blobs", "graph_writes", "graph_requests", "graph_effects"}
)

// threadRec is a thread's head: its last write, for --retain-idle, and the
// tombstone of the late-write rule.
type threadRec struct {
	UpdateTime int64 `json:"update_time_ns"`
	// Deleted is set once the thread has been deleted holding checkpoints
	// or writes; DeletedThrough is the greatest checkpoint id they named.
	Deleted        bool   `json:"deleted,omitempty"`
	DeletedThrough string `json:"deleted_through,omitempty"`
}

type graphCheckpointRec struct {
	ParentID        string            `json:"parent_id,omitempty"`
	Type            string            `json:"type"`
	ChannelVersions map[string]string `json:"channel_versions,omitempty"`
	MetadataJSON    string            `json:"metadata_json"`
	PutTime         int64             `json:"put_time_ns"`
}

type graphBlobRec struct {
	Type string `json:"type"`
}

type graphWriteRec struct {
	TaskPath string `json:"task_path,omitempty"`
	Channel  string `json:"channel"`
	Type     string `json:"type"`
}

type graphRequestRec struct {
	Fingerprint []byte `json:"fingerprint"`
	// EffectAttempt is the attempt a BeginThreadEffect under this id started
	// (schema version 6 on); 0 for other writes.
	EffectAttempt uint32 `json:"effect_attempt,omitempty"`
}

// gsum is the checksum of a graph row: data is its last key part.
func gsum(table string, record, data []byte, key ...string) int64 {
	parts := make([][]byte, 0, len(key)+1)
	for _, k := range key {
		parts = append(parts, []byte(k))
	}
	return checksum(table, append(parts, data), record)
}

func gdecode(thread, table string, record, data []byte, sum int64, v any, key ...string) error {
	parts := make([][]byte, 0, len(key)+1)
	for _, k := range key {
		parts = append(parts, []byte(k))
	}
	if err := decode(table, append(parts, data), record, sum, v); err != nil {
		return graphCorrupt(thread, err)
	}
	return nil
}

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }

func graphCorrupt(thread string, err error) error {
	return fmt.Errorf("%w: graph thread %q: stored data cannot be decoded (%v) and can no longer be trusted; delete the thread with DeleteThread",
		core.ErrCorrupt, thread, err)
}

// graphRefusals are the refusals of the graph service, passed through as
// they are.
func graphRefusal(err error) bool {
	return isRefusal(err) || errors.Is(err, core.ErrUploadAborted) || errors.Is(err, errCallback)
}

// graphTx runs fn in one read-committed transaction bounded by the
// statement timeout, retrying it after a serialization failure or deadlock;
// fn must set its results afresh each time.
func (s *Store) graphTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		err = s.graphTxOnce(ctx, fn)
		var pe *pgconn.PgError
		if retryBegin(ctx, err) {
			continue // fn has not run
		}
		if err == nil || !errors.As(err, &pe) || !(pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505") {
			break
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
	if err != nil && !graphRefusal(err) {
		return s.unavailable(ctx, err)
	}
	return err
}

func (s *Store) graphTxOnce(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*s.timeout+timeoutGrace)
	defer cancel()
	tx, err := s.pool.Begin(tctx)
	if err != nil {
		return &beginFailed{err: err}
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if err := s.setLocalTimeout(tctx, tx); err != nil {
		return err
	}
	if err := fn(tctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(tctx); err != nil {
		if !errors.Is(err, pgx.ErrTxCommitRollback) {
			return &ambiguousCommit{err: err}
		}
		return err
	}
	return nil
}

// graphWrite runs fn for thread in the next group commit, as write does
// for a session: inside a SAVEPOINT of a transaction shared with the
// requests queued meanwhile, acknowledged once that COMMIT returns. The
// batch orders its requests by key, and a thread's key cannot be a
// session's lock: it only orders the batch.
// graphOpPrefix starts the key of a graph write in the group commit; no
// session id starts with NUL.
const graphOpPrefix = "\x00graph\x00"

func (s *Store) graphWrite(ctx context.Context, thread string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.write(ctx, graphOpPrefix+thread, func(ctx context.Context, q *query) error { return fn(ctx, q.tx) })
}

// graphRead runs fn in a read-only snapshot, like read.
func (s *Store) graphRead(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 4*s.timeout+timeoutGrace)
	defer cancel()
	err := s.readTx(tctx, func(ctx context.Context, q *query) error { return fn(ctx, q.tx) })
	if err != nil && !graphRefusal(err) {
		return s.unavailable(ctx, err)
	}
	return err
}

// lockThread locks the thread's row, creating a placeholder when it has
// none (created is then true), and returns its head, nil for a placeholder.
func (s *Store) lockThread(ctx context.Context, tx pgx.Tx, thread string) (h *threadRec, created bool, err error) {
	for range 2 {
		var rec []byte
		var sum int64
		err := tx.QueryRow(ctx, "SELECT record, checksum FROM "+s.table("graph_threads")+" WHERE thread_id = $1 FOR UPDATE", []byte(thread)).Scan(&rec, &sum)
		switch {
		case err == nil && created:
			return nil, true, nil
		case err == nil:
			h = &threadRec{}
			if err := gdecode(thread, "graph_threads", rec, nil, sum, h); err != nil {
				return nil, false, err
			}
			return h, false, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, false, err
		}
		rec, _ = encode(threadRec{})
		tag, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_threads")+" (thread_id, record, checksum) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
			[]byte(thread), rec, gsum("graph_threads", rec, nil))
		if err != nil {
			return nil, false, err
		}
		created = tag.RowsAffected() == 1
	}
	return nil, false, fmt.Errorf("graph thread %q: its row vanished while being locked", thread)
}

// putThread writes the thread's head with the current time, keeping h's
// tombstone fields.
func (s *Store) putThread(ctx context.Context, tx pgx.Tx, thread string, h *threadRec) error {
	n := threadRec{UpdateTime: nanos(s.now())}
	if h != nil {
		n.Deleted, n.DeletedThrough = h.Deleted, h.DeletedThrough
	}
	rec, err := encode(n)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE "+s.table("graph_threads")+" SET record = $2, checksum = $3 WHERE thread_id = $1",
		[]byte(thread), rec, gsum("graph_threads", rec, nil))
	return err
}

// checkRequest: already is true when requestID was applied with fp.
func (s *Store) checkRequest(ctx context.Context, tx pgx.Tx, thread, requestID string, fp []byte) (bool, error) {
	if requestID == "" {
		return false, nil
	}
	r, err := s.requestRow(ctx, tx, thread, requestID)
	if err != nil {
		return false, err
	}
	if r == nil {
		return false, nil
	}
	return core.GraphReplay(thread, requestID, r.Fingerprint, true, fp)
}

// requestRow reads the thread's record of requestID; nil when it has none.
func (s *Store) requestRow(ctx context.Context, tx pgx.Tx, thread, requestID string) (*graphRequestRec, error) {
	var rec []byte
	var sum int64
	err := tx.QueryRow(ctx, "SELECT record, checksum FROM "+s.table("graph_requests")+" WHERE thread_id = $1 AND request_id = $2",
		[]byte(thread), []byte(requestID)).Scan(&rec, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r graphRequestRec
	if err := gdecode(thread, "graph_requests", rec, nil, sum, &r, requestID); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Store) putRequest(ctx context.Context, tx pgx.Tx, thread, requestID string, fp []byte) error {
	return s.putRequestRec(ctx, tx, thread, requestID, graphRequestRec{Fingerprint: fp})
}

// putRequestRec remembers requestID with r; nothing for no request id.
func (s *Store) putRequestRec(ctx context.Context, tx pgx.Tx, thread, requestID string, r graphRequestRec) error {
	if requestID == "" {
		return nil
	}
	rec, err := encode(r)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+s.table("graph_requests")+" (thread_id, request_id, record, checksum) VALUES ($1, $2, $3, $4)",
		[]byte(thread), []byte(requestID), rec, gsum("graph_requests", rec, nil, requestID))
	return err
}

// PutCheckpoint implements core.GraphStore.
func (s *Store) PutCheckpoint(ctx context.Context, p *core.GraphPut) (bool, error) {
	var fp []byte
	if p.RequestID != "" {
		fp = p.Fingerprint().Sum(nil)
	}
	var already bool
	err := s.graphWrite(ctx, p.Checkpoint.ThreadID, s.putOp(p, fp, &already))
	return already, err
}

// putOp is PutCheckpoint's request in a group commit; it sets *already.
func (s *Store) putOp(p *core.GraphPut, fp []byte, already *bool) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		var err error
		*already = false
		h, _, err := s.lockThread(ctx, tx, p.Checkpoint.ThreadID)
		if err != nil {
			return err
		}
		if *already, err = s.checkRequest(ctx, tx, p.Checkpoint.ThreadID, p.RequestID, fp); err != nil || *already {
			return err
		}
		if err := s.putCheckpoint(ctx, tx, p, h); err != nil {
			return err
		}
		return s.putRequest(ctx, tx, p.Checkpoint.ThreadID, p.RequestID, fp)
	}
}

// putCheckpoint upserts p's checkpoint and inserts its blobs not stored
// yet, with every value's bytes in Data; the caller holds the thread's lock.
func (s *Store) putCheckpoint(ctx context.Context, tx pgx.Tx, p *core.GraphPut, h *threadRec) error {
	c := p.Checkpoint
	rec, err := encode(graphCheckpointRec{
		ParentID: c.ParentID, Type: c.Value.Type, ChannelVersions: c.ChannelVersions,
		MetadataJSON: c.MetadataJSON, PutTime: nanos(s.now()),
	})
	if err != nil {
		return err
	}
	data := nonNil(c.Value.Data)
	var runID []byte
	if r := core.MetadataRunID(c.MetadataJSON); r != "" {
		runID = []byte(r)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_checkpoints")+
		" (thread_id, ns, checkpoint_id, run_id, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7)"+
		" ON CONFLICT (thread_id, ns, checkpoint_id) DO UPDATE SET run_id = EXCLUDED.run_id, record = EXCLUDED.record, data = EXCLUDED.data, checksum = EXCLUDED.checksum",
		[]byte(c.ThreadID), []byte(c.NS), []byte(c.ID), runID, rec, data, gsum("graph_checkpoints", rec, data, c.NS, c.ID)); err != nil {
		return err
	}
	for _, b := range p.Blobs {
		rec, err := encode(graphBlobRec{Type: b.Value.Type})
		if err != nil {
			return err
		}
		data := nonNil(b.Value.Data)
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_blobs")+
			" (thread_id, ns, channel, version, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
			[]byte(c.ThreadID), []byte(c.NS), []byte(b.Channel), []byte(b.Version), rec, data,
			gsum("graph_blobs", rec, data, c.NS, b.Channel, b.Version)); err != nil {
			return err
		}
	}
	return s.putThread(ctx, tx, c.ThreadID, h)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// PutWrites implements core.GraphStore. The late-write rule: once a
// thread has been deleted, a write for a checkpoint id not above the
// greatest id the thread held then is dropped unless that checkpoint has
// been stored again.
func (s *Store) PutWrites(ctx context.Context, w *core.GraphWrites) (core.GraphWritesResult, error) {
	var fp []byte
	if w.RequestID != "" {
		fp = w.Fingerprint()
	}
	var res core.GraphWritesResult
	err := s.graphWrite(ctx, w.ThreadID, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		res, err = s.putWrites(ctx, tx, w, fp, func(i int) ([]byte, error) { return w.Writes[i].Value.Data, nil })
		return err
	})
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	return res, nil
}

// putWrites stores w's writes in tx under the thread's lock, as PutWrites
// does, data(i) giving the bytes of w.Writes[i]'s value.
func (s *Store) putWrites(ctx context.Context, tx pgx.Tx, w *core.GraphWrites, fp []byte, data func(i int) ([]byte, error)) (core.GraphWritesResult, error) {
	var res core.GraphWritesResult
	h, _, err := s.lockThread(ctx, tx, w.ThreadID)
	if err != nil {
		return res, err
	}
	already, err := s.checkRequest(ctx, tx, w.ThreadID, w.RequestID, fp)
	if err != nil || already {
		res.AlreadyApplied = already
		return res, err
	}
	if h != nil && core.LateWrite(h.Deleted, h.DeletedThrough, w.CheckpointID) {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3)",
			[]byte(w.ThreadID), []byte(w.NS), []byte(w.CheckpointID)).Scan(&exists); err != nil {
			return res, err
		}
		if !exists {
			res.DroppedLate = true
			return res, nil
		}
	}
	conflict := " ON CONFLICT DO NOTHING"
	if w.IsUpsert() {
		conflict = " ON CONFLICT (thread_id, ns, checkpoint_id, task_id, idx) DO UPDATE SET record = EXCLUDED.record, data = EXCLUDED.data, checksum = EXCLUDED.checksum"
	}
	for i, x := range w.Writes {
		rec, err := encode(graphWriteRec{TaskPath: w.TaskPath, Channel: x.Channel, Type: x.Value.Type})
		if err != nil {
			return res, err
		}
		b, err := data(i)
		if err != nil {
			return res, err
		}
		b = nonNil(b)
		tag, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_writes")+
			" (thread_id, ns, checkpoint_id, task_id, idx, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"+conflict,
			[]byte(w.ThreadID), []byte(w.NS), []byte(w.CheckpointID), []byte(w.TaskID), x.Idx, rec, b,
			gsum("graph_writes", rec, b, w.NS, w.CheckpointID, w.TaskID, fmt.Sprint(x.Idx)))
		if err != nil {
			return res, err
		}
		res.Written += int(tag.RowsAffected())
	}
	if err := s.putThread(ctx, tx, w.ThreadID, h); err != nil {
		return res, err
	}
	return res, s.putRequest(ctx, tx, w.ThreadID, w.RequestID, fp)
}
