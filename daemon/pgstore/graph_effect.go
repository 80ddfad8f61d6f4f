package pgstore

import (
	"context"
	"errors"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
)

// The graph-thread ledger (schema version 6): one graph_effects row per
// tool call of a thread, keyed by namespace and tool use id. Its record
// holds the entry's fields and data the latest attempt's output bytes, both
// covered by the checksum as in the other graph tables. A begin that
// started an attempt remembers the attempt in its graph_requests record
// (graphRequestRec.EffectAttempt), so that its retry answers that attempt.
// BeginThreadEffect and RecordThreadEffect join the group commit as
// PutWrites does and first lock the thread's row, so the read, the rule of
// core and the write of one entry are serialized on every host.
var graphEffectsMigration = []string{
	`CREATE TABLE {graph_effects} (
		thread_id   BYTEA NOT NULL,
		ns          BYTEA NOT NULL,
		tool_use_id BYTEA NOT NULL,
		record      BYTEA NOT NULL,
		data        BYTEA NOT NULL,
		checksum    BIGINT NOT NULL,
		PRIMARY KEY (thread_id, ns, tool_use_id))`,
}

// graphEffectRec is a ledger entry as stored, but for its key and its
// output's bytes (the row's data).
type graphEffectRec struct {
	Name           string `json:"name"`
	InputJSON      string `json:"input_json"`
	InputDigest    []byte `json:"input_digest"`
	Class          int    `json:"effect_class"`
	IdempotencyKey string `json:"idempotency_key"`
	Attempts       uint32 `json:"attempts"`
	State          int    `json:"state"`
	// OutputType and OutputDigest describe the latest attempt's output;
	// empty while it is begun.
	OutputType   string `json:"output_type,omitempty"`
	OutputDigest []byte `json:"output_digest,omitempty"`
	BeginTime    int64  `json:"begin_time_ns"`
	RecordTime   int64  `json:"record_time_ns,omitempty"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	// Resolution is how the latest attempt in doubt was settled.
	Resolution *resolutionRec `json:"resolution,omitempty"`
	// The duplicate-intent guard's fields, as core.ThreadEffect's.
	DuplicateOf string `json:"duplicate_of,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	// Approval is the call's approval record.
	Approval *approvalRec `json:"approval,omitempty"`
	// The resolutions and approval decisions replaced, as ledgerEntryRec's.
	earlierRecs
}

// graphEffectRecOf is e as stored: its record and its output's bytes,
// which are read when e's output is read in pieces.
func graphEffectRecOf(e *core.ThreadEffect) (graphEffectRec, []byte, error) {
	r := graphEffectRec{
		Name: e.Name, InputJSON: e.InputJSON, InputDigest: e.InputDigest, Class: int(e.Class),
		IdempotencyKey: e.IdempotencyKey, Attempts: e.Attempts, State: int(e.State),
		BeginTime: nanosOrZero(e.BeginTime), CheckpointID: e.CheckpointID, Resolution: resolutionRecOf(e.Resolution),
		DuplicateOf: e.DuplicateOf, RunID: e.RunID,
		Approval: approvalRecOf(e.Approval), earlierRecs: earlierRecsOf(e.EarlierResolutions, e.EarlierApprovals),
	}
	if !e.State.Recorded() {
		return r, []byte{}, nil
	}
	data, err := valueBytes(e.Output)
	if err != nil {
		return r, nil, err
	}
	r.OutputType, r.OutputDigest, r.RecordTime = e.Output.Type, e.OutputDigest, nanosOrZero(e.RecordTime)
	return r, data, nil
}

// threadEffectOf is the entry stored at (thread, ns, toolUseID) with
// record r, its output's value being output(r.OutputType).
func threadEffectOf(thread, ns, toolUseID string, r *graphEffectRec, output func(typ string) core.GraphValue) core.ThreadEffect {
	e := core.ThreadEffect{
		ThreadID: thread, NS: ns, ToolUseID: toolUseID, Name: r.Name, InputJSON: r.InputJSON, InputDigest: r.InputDigest,
		Class: core.EffectClass(r.Class), IdempotencyKey: r.IdempotencyKey, Attempts: r.Attempts,
		State: core.ThreadEffectState(r.State), OutputDigest: r.OutputDigest,
		BeginTime: fromNanos(r.BeginTime), RecordTime: fromNanos(r.RecordTime), CheckpointID: r.CheckpointID,
		Resolution: r.Resolution.resolution(), Approval: r.Approval.approval(), DuplicateOf: r.DuplicateOf, RunID: r.RunID,
	}
	e.EarlierResolutions, e.EarlierApprovals = r.earlier()
	if e.State.Recorded() {
		e.Output = output(r.OutputType)
	}
	return e
}

func inlineOutput(data []byte) func(typ string) core.GraphValue {
	return func(typ string) core.GraphValue {
		return core.GraphValue{Type: typ, Size: int64(len(data)), Data: data}
	}
}

// effectRead is the read of the ledger entry of one call.
func effectRead(thread, ns, toolUseID string) *rowRead {
	return &rowRead{withData: true, k: rowKey{table: "graph_effects", cols: []string{"thread_id", "ns", "tool_use_id"},
		args: []any{[]byte(thread), []byte(ns), []byte(toolUseID)}}}
}

// effectOf decodes the ledger entry r read; nil when there was none.
func effectOf(thread, ns, toolUseID string, r *rowRead) (*core.ThreadEffect, error) {
	if !r.found {
		return nil, nil
	}
	var rec graphEffectRec
	if err := gdecode(thread, "graph_effects", r.rec, r.data, r.sum, &rec, ns, toolUseID); err != nil {
		return nil, err
	}
	e := threadEffectOf(thread, ns, toolUseID, &rec, inlineOutput(r.data))
	return &e, nil
}

// putEffect writes e's row, replacing the entry's previous one.
func (s *Store) putEffect(ctx context.Context, q *query, e *core.ThreadEffect) error {
	r, data, err := graphEffectRecOf(e)
	if err != nil {
		return err
	}
	rec, err := encode(r)
	if err != nil {
		return err
	}
	return q.exec(ctx, "INSERT INTO "+s.table("graph_effects")+" (thread_id, ns, tool_use_id, record, data, checksum) VALUES ($1, $2, $3, $4, $5, $6)"+
		" ON CONFLICT (thread_id, ns, tool_use_id) DO UPDATE SET record = EXCLUDED.record, data = EXCLUDED.data, checksum = EXCLUDED.checksum",
		[]byte(e.ThreadID), []byte(e.NS), []byte(e.ToolUseID), rec, data, gsum("graph_effects", rec, data, e.NS, e.ToolUseID))
}

// BeginThreadEffect implements core.GraphStore. It runs in the group commit
// under the thread's lock, as PutWrites does, so that two daemons beginning
// one call never both start an attempt of it.
func (s *Store) BeginThreadEffect(ctx context.Context, b *core.ThreadEffectBegin) (core.ThreadEffectBeginResult, error) {
	var fp []byte
	if b.RequestID != "" {
		fp = b.Fingerprint()
	}
	var res core.ThreadEffectBeginResult
	err := s.graphQueued(ctx, b.ThreadID, func(ctx context.Context, q *query) error {
		var err error
		res, err = s.beginThreadEffect(ctx, q, b, fp)
		return err
	})
	if err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	return res, nil
}

// beginThreadEffect applies b, fp being its fingerprint when it has a
// request id. The thread's lock, the entry and the request id's row are
// read in one round trip; the writes are queued.
func (s *Store) beginThreadEffect(ctx context.Context, q *query, b *core.ThreadEffectBegin, fp []byte) (core.ThreadEffectBeginResult, error) {
	er, req := effectRead(b.ThreadID, b.NS, b.ToolUseID), requestRead(b.ThreadID, b.RequestID)
	h, _, err := s.lockThread(ctx, q, b.ThreadID, er, req)
	if err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	cur, err := effectOf(b.ThreadID, b.NS, b.ToolUseID, er)
	if err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	if req != nil {
		r, err := decodeRequest(b.ThreadID, b.RequestID, req)
		if err != nil {
			return core.ThreadEffectBeginResult{}, err
		}
		var stored []byte
		var attempt uint32
		if r != nil {
			stored, attempt = r.Fingerprint, r.EffectAttempt
		}
		already, err := core.GraphReplay(b.ThreadID, b.RequestID, stored, r != nil, fp)
		if err != nil {
			return core.ThreadEffectBeginResult{}, err
		}
		// A caught duplicate is answered afresh below, writing nothing.
		if already && (cur == nil || cur.DuplicateOf == "") {
			return core.ReplayThreadEffectBegin(cur, attempt), nil
		}
	}
	if cur == nil && b.CheckpointID != "" && h != nil && core.LateWrite(h.Deleted, h.DeletedThrough, b.CheckpointID) {
		exists, err := s.checkpointExists(ctx, q, b.ThreadID, b.NS, b.CheckpointID)
		if err != nil {
			return core.ThreadEffectBeginResult{}, err
		}
		if !exists {
			return core.ThreadEffectBeginResult{Decision: core.DecisionRun, DroppedLate: true}, nil
		}
	}
	next, res, err := core.ApplyThreadEffectBeginGuarded(&guardReader{ctx: ctx, q: q}, cur, b, s.now())
	if err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	if next == nil {
		return res, nil
	}
	if err := s.putEffect(ctx, q, next); err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	if err := s.putThread(ctx, q, b.ThreadID, h); err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	if res.Decision != core.DecisionRun {
		return res, nil // a begin that started no attempt is answered anew on a retry
	}
	if err := s.putRequestRec(ctx, q, b.ThreadID, b.RequestID, graphRequestRec{Fingerprint: fp, EffectAttempt: next.Attempts}); err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	return res, nil
}

// guardReader is core.ThreadGuardReader in a begin's transaction, after
// the writes queued before it.
type guardReader struct {
	ctx context.Context
	q   *query
}

func (g *guardReader) EachNamespaceEffect(thread, ns string, fn func(*core.ThreadEffect) (bool, error)) error {
	if err := g.q.send(g.ctx, ""); err != nil {
		return err
	}
	rows, err := g.q.tx.Query(g.ctx, "SELECT tool_use_id, record, data, checksum FROM "+g.q.s.table("graph_effects")+
		" WHERE thread_id = $1 AND ns = $2 ORDER BY tool_use_id", []byte(thread), []byte(ns))
	if err != nil {
		return err
	}
	type row struct {
		id, rec, data []byte
		sum           int64
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.rec, &x.data, &x.sum)
		return x, err
	})
	if err != nil {
		return err
	}
	for _, x := range all {
		var r graphEffectRec
		if err := gdecode(thread, "graph_effects", x.rec, x.data, x.sum, &r, ns, string(x.id)); err != nil {
			return err
		}
		e := threadEffectOf(thread, ns, string(x.id), &r, inlineOutput(x.data))
		if more, err := fn(&e); err != nil || !more {
			return err
		}
	}
	return nil
}

func (g *guardReader) NewestCheckpointExcept(thread, ns, except string) (string, error) {
	if err := g.q.send(g.ctx, ""); err != nil {
		return "", err
	}
	var id []byte
	err := g.q.tx.QueryRow(g.ctx, "SELECT checkpoint_id FROM "+g.q.s.table("graph_checkpoints")+
		" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id <> $3 ORDER BY checkpoint_id DESC LIMIT 1",
		[]byte(thread), []byte(ns), []byte(except)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return string(id), err
}

// writeThreadEffect applies c in the group commit under the thread's lock,
// as BeginThreadEffect is applied.
func writeThreadEffect[R any](ctx context.Context, s *Store, c core.ThreadEffectChange[R]) (R, error) {
	var res, zero R
	err := s.graphQueued(ctx, c.ThreadID, func(ctx context.Context, q *query) error {
		var err error
		res, err = applyThreadEffect(ctx, s, q, c)
		return err
	})
	if err != nil {
		return zero, err
	}
	return res, nil
}

// applyThreadEffect applies c in q as core.ThreadEffectChange asks, reading
// and writing as beginThreadEffect does: the thread's lock, the entry and
// the request id's row are read in one round trip; the writes are queued.
// Deletes are atomic here, so no thread is hidden.
func applyThreadEffect[R any](ctx context.Context, s *Store, q *query, c core.ThreadEffectChange[R]) (R, error) {
	var zero R
	er, req := effectRead(c.ThreadID, c.NS, c.ToolUseID), requestRead(c.ThreadID, c.RequestID)
	h, _, err := s.lockThread(ctx, q, c.ThreadID, er, req)
	if err != nil {
		return zero, err
	}
	cur, err := effectOf(c.ThreadID, c.NS, c.ToolUseID, er)
	if err != nil {
		return zero, err
	}
	already, err := replayed(c.ThreadID, c.RequestID, c.Fingerprint, req)
	if err != nil {
		return zero, err
	}
	if already {
		if cur == nil {
			return zero, nil
		}
		return c.Replay(*cur), nil
	}
	if c.Late != nil && cur == nil && h != nil && h.Deleted {
		return *c.Late, nil
	}
	next, res, err := c.Apply(cur, s.now())
	if err != nil || next == nil {
		return res, err
	}
	if err := s.putEffect(ctx, q, next); err != nil {
		return zero, err
	}
	if err := s.putThread(ctx, q, c.ThreadID, h); err != nil {
		return zero, err
	}
	if err := s.putRequest(ctx, q, c.ThreadID, c.RequestID, c.Fingerprint); err != nil {
		return zero, err
	}
	return res, nil
}

// RecordThreadEffect implements core.GraphStore (writeThreadEffect).
func (s *Store) RecordThreadEffect(ctx context.Context, r *core.ThreadEffectRecord) (core.ThreadEffectRecordResult, error) {
	return writeThreadEffect(ctx, s, r.Change())
}

// ResolveThreadEffect implements core.GraphStore (writeThreadEffect).
func (s *Store) ResolveThreadEffect(ctx context.Context, r *core.ThreadEffectResolve) (core.ThreadEffectResolveResult, error) {
	return writeThreadEffect(ctx, s, r.Change())
}

// ApproveThreadEffect implements core.GraphStore (writeThreadEffect).
func (s *Store) ApproveThreadEffect(ctx context.Context, r *core.ThreadEffectApprove) (core.ThreadEffectApproveResult, error) {
	return writeThreadEffect(ctx, s, r.Change())
}

// ListThreadEffects implements core.GraphStore, reading one snapshot by the
// primary key of graph_effects a row at a time; a damaged row is
// core.ErrCheckpointCorrupt.
func (s *Store) ListThreadEffects(ctx context.Context, thread string, after core.ThreadEffectKey, limit, maxOutputBytes int) ([]core.ThreadEffect, error) {
	if limit <= 0 {
		return nil, ctx.Err()
	}
	var out []core.ThreadEffect
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		out = nil
		budget := core.OutputBudget{Bytes: maxOutputBytes}
		rows, err := tx.Query(ctx, "SELECT ns, tool_use_id, record, data, checksum FROM "+s.table("graph_effects")+
			" WHERE thread_id = $1 AND (thread_id, ns, tool_use_id) > ($1, $2, $3) ORDER BY ns, tool_use_id LIMIT $4",
			[]byte(thread), []byte(after.NS), []byte(after.ToolUseID), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ns, id, rec, data []byte
			var sum int64
			if err := rows.Scan(&ns, &id, &rec, &data, &sum); err != nil {
				return err
			}
			var r graphEffectRec
			if err := gdecode(thread, "graph_effects", rec, data, sum, &r, string(ns), string(id)); err != nil {
				return err
			}
			e := threadEffectOf(thread, string(ns), string(id), &r, inlineOutput(data))
			budget.Trim(&e)
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
