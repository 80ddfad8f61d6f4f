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
// a read-then-write race. PutCheckpoint, PutWrites and the ledger's
// BeginThreadEffect and RecordThreadEffect join the sessions' group commit
// (graphQueued): each reads the thread's lock with the rows it needs in
// one round trip, with the statements queued before it, and queues its
// writes, so that it costs the group commit one round trip. An upload's
// commit, a delete, a copy and a prune, which may be large, run in their
// own transactions (graphTx). PostgreSQL has no transaction size limit
// like the embedded engine's: a delete, copy or prune of a thread is one
// transaction (bounded by the statement timeout per statement), atomic for
// readers.
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
		core.ErrCheckpointCorrupt, thread, err)
}

// graphRefusals are the refusals of the graph service, passed through as
// they are.
func graphRefusal(err error) bool {
	return isRefusal(err) || errors.Is(err, core.ErrUploadAborted) || errors.As(err, new(*callbackError))
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

// graphOpPrefix starts the key of a graph write in the group commit; no
// session id starts with NUL.
const graphOpPrefix = "\x00graph\x00"

// graphQueued runs fn for thread in the next group commit, as write does
// for a session: inside a SAVEPOINT of a transaction shared with the
// requests queued meanwhile, acknowledged once that COMMIT returns. The
// batch orders its requests by key, and a thread's key cannot be a
// session's lock: it only orders the batch. fn reads and writes only
// through q (op.queues): its reads go in one round trip with the
// statements queued before them, and its writes with the next request's
// reads or with COMMIT.
func (s *Store) graphQueued(ctx context.Context, thread string, fn func(ctx context.Context, q *query) error) error {
	return s.writeOp(ctx, &op{sessionID: graphOpPrefix + thread, fn: fn, queues: true})
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
		return s.readUnavailable(ctx, err)
	}
	return err
}

func threadKey(thread string) rowKey {
	return rowKey{table: "graph_threads", cols: []string{"thread_id"}, args: []any{[]byte(thread)}}
}

// requestRead is the read of the thread's record of requestID; nil for no
// request id.
func requestRead(thread, requestID string) *rowRead {
	if requestID == "" {
		return nil
	}
	return &rowRead{k: rowKey{table: "graph_requests", cols: []string{"thread_id", "request_id"}, args: []any{[]byte(thread), []byte(requestID)}}}
}

// lockThread locks the thread's row, creating a placeholder when it has
// none (created is then true), and returns its head, nil for a placeholder.
// The reads of also, when not nil, go in the same round trip, after the
// lock.
func (s *Store) lockThread(ctx context.Context, q *query, thread string, also ...*rowRead) (h *threadRec, created bool, err error) {
	head := &rowRead{k: threadKey(thread), lock: true}
	rs := []*rowRead{head}
	for _, r := range also {
		if r != nil {
			rs = append(rs, r)
		}
	}
	for range 2 {
		if err := q.readRows(ctx, rs...); err != nil {
			return nil, false, err
		}
		switch {
		case head.found && created:
			return nil, true, nil
		case head.found:
			h = &threadRec{}
			if err := gdecode(thread, "graph_threads", head.rec, nil, head.sum, h); err != nil {
				return nil, false, err
			}
			return h, false, nil
		}
		rec, _ := encode(threadRec{})
		tag, err := q.execTag(ctx, "INSERT INTO "+s.table("graph_threads")+" (thread_id, record, checksum) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
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
func (s *Store) putThread(ctx context.Context, q *query, thread string, h *threadRec) error {
	n := threadRec{UpdateTime: nanos(s.now())}
	if h != nil {
		n.Deleted, n.DeletedThrough = h.Deleted, h.DeletedThrough
	}
	rec, err := encode(n)
	if err != nil {
		return err
	}
	return q.exec(ctx, "UPDATE "+s.table("graph_threads")+" SET record = $2, checksum = $3 WHERE thread_id = $1",
		[]byte(thread), rec, gsum("graph_threads", rec, nil))
}

// checkRequest: already is true when requestID was applied with fp.
func (s *Store) checkRequest(ctx context.Context, q *query, thread, requestID string, fp []byte) (bool, error) {
	r := requestRead(thread, requestID)
	if r == nil {
		return false, nil
	}
	if err := q.readRows(ctx, r); err != nil {
		return false, err
	}
	return replayed(thread, requestID, fp, r)
}

// replayed is checkRequest on the row r read: already is true when
// requestID was applied with fp.
func replayed(thread, requestID string, fp []byte, r *rowRead) (bool, error) {
	if r == nil {
		return false, nil
	}
	rec, err := decodeRequest(thread, requestID, r)
	if err != nil || rec == nil {
		return false, err
	}
	return core.GraphReplay(thread, requestID, rec.Fingerprint, true, fp)
}

// requestRow reads the thread's record of requestID; nil when it has none.
func (s *Store) requestRow(ctx context.Context, q *query, thread, requestID string) (*graphRequestRec, error) {
	r := requestRead(thread, requestID)
	if err := q.readRows(ctx, r); err != nil {
		return nil, err
	}
	return decodeRequest(thread, requestID, r)
}

// decodeRequest decodes the request row r read; nil when there was none.
func decodeRequest(thread, requestID string, r *rowRead) (*graphRequestRec, error) {
	if !r.found {
		return nil, nil
	}
	var rec graphRequestRec
	if err := gdecode(thread, "graph_requests", r.rec, nil, r.sum, &rec, requestID); err != nil {
		return nil, err
	}
	return &rec, nil
}

func (s *Store) putRequest(ctx context.Context, q *query, thread, requestID string, fp []byte) error {
	return s.putRequestRec(ctx, q, thread, requestID, graphRequestRec{Fingerprint: fp})
}

// putRequestRec remembers requestID with r; nothing for no request id.
func (s *Store) putRequestRec(ctx context.Context, q *query, thread, requestID string, r graphRequestRec) error {
	if requestID == "" {
		return nil
	}
	rec, err := encode(r)
	if err != nil {
		return err
	}
	return q.exec(ctx, "INSERT INTO "+s.table("graph_requests")+" (thread_id, request_id, record, checksum) VALUES ($1, $2, $3, $4)",
		[]byte(thread), []byte(requestID), rec, gsum("graph_requests", rec, nil, requestID))
}

// PutCheckpoint implements core.GraphStore.
func (s *Store) PutCheckpoint(ctx context.Context, p *core.GraphPut) (bool, error) {
	var fp []byte
	if p.RequestID != "" {
		fp = p.Fingerprint().Sum(nil)
	}
	var already bool
	err := s.graphQueued(ctx, p.Checkpoint.ThreadID, s.putOp(p, fp, &already))
	return already, err
}

// putOp is PutCheckpoint's request in a group commit; it sets *already.
// The thread's lock and its request id's row are read in one round trip;
// the writes are queued.
func (s *Store) putOp(p *core.GraphPut, fp []byte, already *bool) func(ctx context.Context, q *query) error {
	return func(ctx context.Context, q *query) error {
		var err error
		*already = false
		req := requestRead(p.Checkpoint.ThreadID, p.RequestID)
		h, _, err := s.lockThread(ctx, q, p.Checkpoint.ThreadID, req)
		if err != nil {
			return err
		}
		if *already, err = replayed(p.Checkpoint.ThreadID, p.RequestID, fp, req); err != nil || *already {
			return err
		}
		if err := s.putCheckpoint(ctx, q, p, h, inMemory(p)); err != nil {
			return err
		}
		return s.putRequest(ctx, q, p.Checkpoint.ThreadID, p.RequestID, fp)
	}
}

// putCheckpoint upserts p's checkpoint and inserts its blobs not stored
// yet, data(0) giving the checkpoint value's bytes and data(i) those of
// p.Blobs[i-1]; the caller holds the thread's lock.
func (s *Store) putCheckpoint(ctx context.Context, q *query, p *core.GraphPut, h *threadRec, data func(i int) rowData) error {
	c := p.Checkpoint
	rec, err := encode(graphCheckpointRec{
		ParentID: c.ParentID, Type: c.Value.Type, ChannelVersions: c.ChannelVersions,
		MetadataJSON: c.MetadataJSON, PutTime: nanos(s.now()),
	})
	if err != nil {
		return err
	}
	var runID []byte
	if r := core.MetadataRunID(c.MetadataJSON); r != "" {
		runID = []byte(r)
	}
	d := data(0)
	expr, args := d.expr(7)
	if err := q.exec(ctx, "INSERT INTO "+s.table("graph_checkpoints")+
		" (thread_id, ns, checkpoint_id, run_id, record, checksum, data) VALUES ($1, $2, $3, $4, $5, $6, "+expr+")"+
		" ON CONFLICT (thread_id, ns, checkpoint_id) DO UPDATE SET run_id = EXCLUDED.run_id, record = EXCLUDED.record, data = EXCLUDED.data, checksum = EXCLUDED.checksum",
		append([]any{[]byte(c.ThreadID), []byte(c.NS), []byte(c.ID), runID, rec, d.checksum(checkpointKey(c.ThreadID, c.NS, c.ID), rec)}, args...)...); err != nil {
		return err
	}
	for i, b := range p.Blobs {
		rec, err := encode(graphBlobRec{Type: b.Value.Type})
		if err != nil {
			return err
		}
		d := data(i + 1)
		expr, args := d.expr(7)
		if err := q.exec(ctx, "INSERT INTO "+s.table("graph_blobs")+
			" (thread_id, ns, channel, version, record, checksum, data) VALUES ($1, $2, $3, $4, $5, $6, "+expr+") ON CONFLICT DO NOTHING",
			append([]any{[]byte(c.ThreadID), []byte(c.NS), []byte(b.Channel), []byte(b.Version), rec,
				d.checksum(blobKey(c.ThreadID, c.NS, b.Channel, b.Version), rec)}, args...)...); err != nil {
			return err
		}
	}
	return s.putThread(ctx, q, c.ThreadID, h)
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
	err := s.graphQueued(ctx, w.ThreadID, func(ctx context.Context, q *query) error {
		return s.putWrites(ctx, q, w, fp, func(i int) rowData { return rowData{bytes: w.Writes[i].Value.Data} }, &res)
	})
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	return res, nil
}

// putWrites stores w's writes under the thread's lock, as PutWrites does,
// data(i) giving the bytes of w.Writes[i]'s value, and sets *res afresh;
// res.Written counts the rows written once q has sent its writes.
func (s *Store) putWrites(ctx context.Context, q *query, w *core.GraphWrites, fp []byte, data func(i int) rowData, res *core.GraphWritesResult) error {
	*res = core.GraphWritesResult{}
	req := requestRead(w.ThreadID, w.RequestID)
	h, _, err := s.lockThread(ctx, q, w.ThreadID, req)
	if err != nil {
		return err
	}
	already, err := replayed(w.ThreadID, w.RequestID, fp, req)
	if err != nil || already {
		res.AlreadyApplied = already
		return err
	}
	if h != nil && core.LateWrite(h.Deleted, h.DeletedThrough, w.CheckpointID) {
		exists, err := s.checkpointExists(ctx, q, w.ThreadID, w.NS, w.CheckpointID)
		if err != nil {
			return err
		}
		if !exists {
			res.DroppedLate = true
			return nil
		}
	}
	conflict := " ON CONFLICT DO NOTHING"
	if w.IsUpsert() {
		conflict = " ON CONFLICT (thread_id, ns, checkpoint_id, task_id, idx) DO UPDATE SET record = EXCLUDED.record, data = EXCLUDED.data, checksum = EXCLUDED.checksum"
	}
	for i, x := range w.Writes {
		rec, err := encode(graphWriteRec{TaskPath: w.TaskPath, Channel: x.Channel, Type: x.Value.Type})
		if err != nil {
			return err
		}
		d := data(i)
		expr, args := d.expr(8)
		if err := q.execCount(ctx, &res.Written, "INSERT INTO "+s.table("graph_writes")+
			" (thread_id, ns, checkpoint_id, task_id, idx, record, checksum, data) VALUES ($1, $2, $3, $4, $5, $6, $7, "+expr+")"+conflict,
			append([]any{[]byte(w.ThreadID), []byte(w.NS), []byte(w.CheckpointID), []byte(w.TaskID), x.Idx, rec,
				d.checksum(writeKey(w.ThreadID, w.NS, w.CheckpointID, w.TaskID, x.Idx), rec)}, args...)...); err != nil {
			return err
		}
	}
	if err := s.putThread(ctx, q, w.ThreadID, h); err != nil {
		return err
	}
	return s.putRequest(ctx, q, w.ThreadID, w.RequestID, fp)
}

// checkpointExists reports whether the thread holds the checkpoint.
func (s *Store) checkpointExists(ctx context.Context, q *query, thread, ns, checkpointID string) (bool, error) {
	r := &rowRead{k: checkpointKey(thread, ns, checkpointID)}
	if err := q.readRows(ctx, r); err != nil {
		return false, err
	}
	return r.found, nil
}
