package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrThreadExists is ImportGraphThread's refusal of a thread the schema
// holds rows of already.
var ErrThreadExists = errors.New("graph thread already exists")

// importBatchBytes and importBatchRows bound the rows ImportGraphThread
// sends in one round trip, each round trip bounded by the statement
// timeout.
const (
	importBatchBytes = 4 << 20
	importBatchRows  = 256
)

// errSource stands for an error reading the dump's values, returned as it
// is.
type errSource struct{ err error }

func (e *errSource) Error() string { return e.err.Error() }
func (e *errSource) Unwrap() error { return e.err }

// ImportGraphThread writes every record of d, as it is (put and update
// times, tombstone, request ids and the ledger included), in one
// transaction; it is ErrThreadExists when the schema has any row of the
// thread already, and writes nothing then. An error reading one of d's
// values is returned as it is, nothing written.
func (s *Store) ImportGraphThread(ctx context.Context, d *core.GraphThreadDump) error {
	err := s.importGraphTx(ctx, d)
	var pe *pgconn.PgError
	var se *errSource
	switch {
	case errors.As(err, &se):
		return se.err
	case errors.As(err, &pe) && pe.Code == "23505":
		return fmt.Errorf("%w: thread %q is in schema %q already", ErrThreadExists, d.ThreadID, s.schema)
	case err != nil && !errors.Is(err, ErrThreadExists):
		return s.unavailable(ctx, err)
	}
	return err
}

func (s *Store) importGraphTx(ctx context.Context, d *core.GraphThreadDump) error {
	bctx, cancel := context.WithTimeout(ctx, 4*s.timeout+timeoutGrace)
	tx, err := s.pool.BeginTx(bctx, pgx.TxOptions{})
	cancel()
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	b := &importBatch{s: s, tx: tx}
	found, err := b.threadExists(ctx, d.ThreadID)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%w: schema %q has rows of thread %q already", ErrThreadExists, s.schema, d.ThreadID)
	}
	if err := b.addGraphThread(ctx, d); err != nil {
		return err
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	return b.run(ctx, func(ctx context.Context) error { return tx.Commit(ctx) })
}

// threadExists reports whether any table of the graph service, staged
// uploads included, holds a row of thread.
func (b *importBatch) threadExists(ctx context.Context, thread string) (bool, error) {
	s := b.s
	exists := "SELECT EXISTS (SELECT 1 FROM " + s.table("graph_threads") + " WHERE thread_id = $1)"
	for _, t := range append(graphDataTables, "graph_uploads") {
		exists += " OR EXISTS (SELECT 1 FROM " + s.table(t) + " WHERE thread_id = $1)"
	}
	var found bool
	err := b.run(ctx, func(ctx context.Context) error {
		if err := s.setLocalTimeout(ctx, b.tx); err != nil {
			return err
		}
		return b.tx.QueryRow(ctx, exists, []byte(thread)).Scan(&found)
	})
	return found, err
}

// addGraphThread queues the rows of every record of d: the thread's head,
// its values (addGraphValues) and its request ids and ledger
// (addGraphLedger).
func (b *importBatch) addGraphThread(ctx context.Context, d *core.GraphThreadDump) error {
	s := b.s
	rec, err := encode(threadRec{UpdateTime: nanos(d.UpdateTime), Deleted: d.Deleted, DeletedThrough: d.DeletedThrough})
	if err != nil {
		return err
	}
	b.queue(len(rec), "INSERT INTO "+s.table("graph_threads")+" (thread_id, record, checksum) VALUES ($1, $2, $3)",
		[]byte(d.ThreadID), rec, gsum("graph_threads", rec, nil))
	if err := b.addGraphValues(ctx, d); err != nil {
		return err
	}
	return b.addGraphLedger(ctx, d)
}

// addGraphValues queues the rows of d's checkpoints, channel blobs and
// pending writes, each with its value's bytes.
func (b *importBatch) addGraphValues(ctx context.Context, d *core.GraphThreadDump) error {
	s, th := b.s, []byte(d.ThreadID)
	for _, c := range d.Checkpoints {
		rec, err := encode(graphCheckpointRec{ParentID: c.ParentID, Type: c.Value.Type, ChannelVersions: c.ChannelVersions,
			MetadataJSON: c.MetadataJSON, PutTime: nanosOrZero(c.PutTime)})
		if err != nil {
			return err
		}
		data, err := valueBytes(c.Value)
		if err != nil {
			return err
		}
		var runID []byte
		if r := core.MetadataRunID(c.MetadataJSON); r != "" {
			runID = []byte(r)
		}
		if err := b.add(ctx, len(rec)+len(data), "INSERT INTO "+s.table("graph_checkpoints")+
			" (thread_id, ns, checkpoint_id, run_id, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			th, []byte(c.NS), []byte(c.ID), runID, rec, data, gsum("graph_checkpoints", rec, data, c.NS, c.ID)); err != nil {
			return err
		}
	}
	for _, bl := range d.Blobs {
		rec, err := encode(graphBlobRec{Type: bl.Value.Type})
		if err != nil {
			return err
		}
		data, err := valueBytes(bl.Value)
		if err != nil {
			return err
		}
		if err := b.add(ctx, len(rec)+len(data), "INSERT INTO "+s.table("graph_blobs")+
			" (thread_id, ns, channel, version, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			th, []byte(bl.NS), []byte(bl.Channel), []byte(bl.Version), rec, data, gsum("graph_blobs", rec, data, bl.NS, bl.Channel, bl.Version)); err != nil {
			return err
		}
	}
	for _, w := range d.Writes {
		rec, err := encode(graphWriteRec{TaskPath: w.TaskPath, Channel: w.Channel, Type: w.Value.Type})
		if err != nil {
			return err
		}
		data, err := valueBytes(w.Value)
		if err != nil {
			return err
		}
		if err := b.add(ctx, len(rec)+len(data), "INSERT INTO "+s.table("graph_writes")+
			" (thread_id, ns, checkpoint_id, task_id, idx, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
			th, []byte(w.NS), []byte(w.CheckpointID), []byte(w.TaskID), w.Idx, rec, data,
			gsum("graph_writes", rec, data, w.NS, w.CheckpointID, w.TaskID, fmt.Sprint(w.Idx))); err != nil {
			return err
		}
	}
	return nil
}

// addGraphLedger queues the rows of d's request ids and ledger entries.
func (b *importBatch) addGraphLedger(ctx context.Context, d *core.GraphThreadDump) error {
	s, th := b.s, []byte(d.ThreadID)
	for _, r := range d.Requests {
		rec, err := encode(graphRequestRec{Fingerprint: r.Fingerprint, EffectAttempt: r.EffectAttempt})
		if err != nil {
			return err
		}
		if err := b.add(ctx, len(rec), "INSERT INTO "+s.table("graph_requests")+" (thread_id, request_id, record, checksum) VALUES ($1, $2, $3, $4)",
			th, []byte(r.RequestID), rec, gsum("graph_requests", rec, nil, r.RequestID)); err != nil {
			return err
		}
	}
	for i := range d.Effects {
		e := &d.Effects[i]
		r, data, err := graphEffectRecOf(e)
		if err != nil {
			return err
		}
		rec, err := encode(r)
		if err != nil {
			return err
		}
		if err := b.add(ctx, len(rec)+len(data), "INSERT INTO "+s.table("graph_effects")+
			" (thread_id, ns, tool_use_id, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6)",
			th, []byte(e.NS), []byte(e.ToolUseID), rec, data, gsum("graph_effects", rec, data, e.NS, e.ToolUseID)); err != nil {
			return err
		}
	}
	return nil
}

// valueBytes returns all of v's bytes, an error reading them as an
// errSource.
func valueBytes(v core.GraphValue) ([]byte, error) {
	if v.Data != nil || v.Size == 0 {
		return nonNil(v.Data), nil
	}
	out := make([]byte, 0, v.Size)
	if err := v.Each(func(p []byte) error {
		out = append(out, p...)
		return nil
	}); err != nil {
		return nil, &errSource{err}
	}
	if int64(len(out)) != v.Size {
		return nil, &errSource{fmt.Errorf("a value of %d bytes read as %d bytes", v.Size, len(out))}
	}
	return out, nil
}

// importBatch queues an import's statements and sends them a batch at a
// time.
type importBatch struct {
	s     *Store
	tx    pgx.Tx
	batch pgx.Batch
	size  int
}

// run calls fn with ctx bounded as one round trip is.
func (b *importBatch) run(ctx context.Context, fn func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, 4*b.s.timeout+timeoutGrace)
	defer cancel()
	return fn(rctx)
}

func (b *importBatch) queue(size int, sql string, args ...any) {
	b.batch.Queue(sql, args...)
	b.size += size
}

// add queues a statement, sending the batch once it is full.
func (b *importBatch) add(ctx context.Context, size int, sql string, args ...any) error {
	b.queue(size, sql, args...)
	if b.size < importBatchBytes && b.batch.Len() < importBatchRows {
		return nil
	}
	return b.flush(ctx)
}

func (b *importBatch) flush(ctx context.Context) error {
	if b.batch.Len() == 0 {
		return nil
	}
	err := b.run(ctx, func(ctx context.Context) error { return b.tx.SendBatch(ctx, &b.batch).Close() })
	b.batch, b.size = pgx.Batch{}, 0
	return err
}

// ReadGraphThread calls fn with every record the schema holds of thread,
// read in one snapshot, in the order core.GraphThreadDump gives; found
// is false, and fn is not called, when the thread has no head. A large
// value's bytes are read, and its checksum checked, when its Each is
// called, and only while fn runs; fn's error is returned as it is.
func (s *Store) ReadGraphThread(ctx context.Context, thread string, fn func(*core.GraphThreadDump) error) (found bool, err error) {
	err = s.readTx(ctx, func(ctx context.Context, q *query) error {
		found = false
		d, err := s.readGraphThread(ctx, q.tx, thread)
		if err != nil || d == nil {
			return err
		}
		found = true
		return callback(fn(d))
	})
	if err != nil && !graphRefusal(err) {
		return found, s.unavailable(ctx, err)
	}
	return found, uncallback(err)
}

// inlineBytes is the largest value readGraphThread reads with its row.
const inlineBytes = 64 << 10

func (s *Store) readGraphThread(ctx context.Context, tx pgx.Tx, thread string) (*core.GraphThreadDump, error) {
	r := &threadReader{ctx: ctx, tx: tx, s: s, thread: thread, th: []byte(thread)}
	d, err := r.head()
	if err != nil || d == nil {
		return nil, err
	}
	for _, read := range []func(*core.GraphThreadDump) error{r.checkpoints, r.blobs, r.writes, r.requests, r.effects} {
		if err := read(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// threadReader reads one graph thread's rows in a transaction.
type threadReader struct {
	ctx    context.Context
	tx     pgx.Tx
	s      *Store
	thread string
	th     []byte // thread, as the key column holds it
}

// head returns the dump of the thread's head alone, or nil when it has none.
func (r *threadReader) head() (*core.GraphThreadDump, error) {
	var rec []byte
	var sum int64
	err := r.tx.QueryRow(r.ctx, "SELECT record, checksum FROM "+r.s.table("graph_threads")+" WHERE thread_id = $1", r.th).Scan(&rec, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h threadRec
	if err := gdecode(r.thread, "graph_threads", rec, nil, sum, &h); err != nil {
		return nil, err
	}
	return &core.GraphThreadDump{ThreadID: r.thread, UpdateTime: fromNanos(h.UpdateTime), Deleted: h.Deleted, DeletedThrough: h.DeletedThrough}, nil
}

// rows reads table's rows of the thread ordered by order, each with its key
// parts (the columns keys names, as gsum takes them), its record and its
// value: in memory up to inlineBytes, read in pieces when asked above.
func (r *threadReader) rows(table, keys, order string, fn func(key []string, rec []byte, v func(typ string) core.GraphValue) error) error {
	rs, err := r.tx.Query(r.ctx, "SELECT "+keys+", record, checksum, "+valueSQL("data", inlineBytes)+" FROM "+
		r.s.table(table)+" WHERE thread_id = $1 ORDER BY "+order, r.th)
	if err != nil {
		return err
	}
	defer rs.Close()
	vr := &valueReader{ctx: r.ctx, tx: r.tx, s: r.s}
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			return err
		}
		n := len(vals) - 4
		key, parts := make([]string, n), make([][]byte, n)
		for i := range n {
			parts[i], _ = vals[i].([]byte)
			key[i] = string(parts[i])
		}
		rec, _ := vals[n].([]byte)
		sum, _ := vals[n+1].(int64)
		data, _ := vals[n+2].([]byte)
		size, _ := vals[n+3].(int32)
		value, err := vr.decode(r.thread, graphRowKey(table, keys, r.th, parts), rec, sum, storedValue{data: data, size: size}, new(any))
		if err != nil {
			return err
		}
		if err := fn(key, rec, value); err != nil {
			return err
		}
	}
	return rs.Err()
}

func (r *threadReader) checkpoints(d *core.GraphThreadDump) error {
	return r.rows("graph_checkpoints", "ns, checkpoint_id", "ns, checkpoint_id", func(key []string, rec []byte, v func(string) core.GraphValue) error {
		var c graphCheckpointRec
		if err := decodeJSON(rec, &c); err != nil {
			return graphCorrupt(r.thread, err)
		}
		d.Checkpoints = append(d.Checkpoints, core.GraphCheckpointDump{GraphCheckpoint: core.GraphCheckpoint{
			ThreadID: r.thread, NS: key[0], ID: key[1], ParentID: c.ParentID, Value: v(c.Type),
			ChannelVersions: c.ChannelVersions, MetadataJSON: c.MetadataJSON,
		}, PutTime: fromNanos(c.PutTime)})
		return nil
	})
}

func (r *threadReader) blobs(d *core.GraphThreadDump) error {
	return r.rows("graph_blobs", "ns, channel, version", "ns, channel, version", func(key []string, rec []byte, v func(string) core.GraphValue) error {
		var b graphBlobRec
		if err := decodeJSON(rec, &b); err != nil {
			return graphCorrupt(r.thread, err)
		}
		d.Blobs = append(d.Blobs, core.GraphBlobDump{NS: key[0], GraphBlob: core.GraphBlob{Channel: key[1], Version: key[2], Value: v(b.Type)}})
		return nil
	})
}

func (r *threadReader) writes(d *core.GraphThreadDump) error {
	return r.rows("graph_writes", "ns, checkpoint_id, task_id, idx::text::bytea", "ns, checkpoint_id, task_id, idx", func(key []string, rec []byte, v func(string) core.GraphValue) error {
		var w graphWriteRec
		if err := decodeJSON(rec, &w); err != nil {
			return graphCorrupt(r.thread, err)
		}
		var idx int32
		if _, err := fmt.Sscan(key[3], &idx); err != nil {
			return graphCorrupt(r.thread, fmt.Errorf("write index %q: %v", key[3], err))
		}
		d.Writes = append(d.Writes, core.GraphWriteDump{NS: key[0], CheckpointID: key[1], GraphWrite: core.GraphWrite{
			TaskID: key[2], TaskPath: w.TaskPath, Idx: idx, Channel: w.Channel, Value: v(w.Type)}})
		return nil
	})
}

func (r *threadReader) requests(d *core.GraphThreadDump) error {
	rs, err := r.tx.Query(r.ctx, "SELECT request_id, record, checksum FROM "+r.s.table("graph_requests")+" WHERE thread_id = $1 ORDER BY request_id", r.th)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var id, rec []byte
		var sum int64
		if err := rs.Scan(&id, &rec, &sum); err != nil {
			return err
		}
		var g graphRequestRec
		if err := gdecode(r.thread, "graph_requests", rec, nil, sum, &g, string(id)); err != nil {
			return err
		}
		d.Requests = append(d.Requests, core.GraphRequestDump{RequestID: string(id), Fingerprint: g.Fingerprint, EffectAttempt: g.EffectAttempt})
	}
	return rs.Err()
}

func (r *threadReader) effects(d *core.GraphThreadDump) error {
	return r.rows("graph_effects", "ns, tool_use_id", "ns, tool_use_id", func(key []string, rec []byte, v func(string) core.GraphValue) error {
		var g graphEffectRec
		if err := decodeJSON(rec, &g); err != nil {
			return graphCorrupt(r.thread, err)
		}
		d.Effects = append(d.Effects, threadEffectOf(r.thread, key[0], key[1], &g, v))
		return nil
	})
}
