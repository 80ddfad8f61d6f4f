package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Empty reports whether the store's schema holds no session and no graph
// thread, live or tombstone.
func (s *Store) Empty(ctx context.Context) (bool, error) {
	var found bool
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		return q.tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table("sessions")+") OR EXISTS (SELECT 1 FROM "+s.table("graph_threads")+")").Scan(&found)
	})
	return !found, err
}

// Import writes every record of d, as it is (epochs, times, idempotency
// keys and request ids included), in one transaction; it is
// core.ErrSessionExists when the store has any row of the session
// already, and writes nothing then.
func (s *Store) Import(ctx context.Context, d *core.SessionDump) error {
	tctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	err := s.importTx(tctx, d)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: session %q is in schema %q already", core.ErrSessionExists, d.SessionID, s.schema)
	}
	if err != nil && !isRefusal(err) {
		return s.unavailable(ctx, err)
	}
	return err
}

func (s *Store) importTx(ctx context.Context, d *core.SessionDump) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if err := s.setLocalTimeout(ctx, tx); err != nil {
		return err
	}
	q := &query{s: s, tx: tx}
	sid := d.SessionID
	for _, t := range tables[1:] { // a stray row of the session is a conflict too
		var found bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table(t)+" WHERE session_id = $1)", []byte(sid)).Scan(&found); err != nil {
			return err
		}
		if found {
			return fmt.Errorf("%w: schema %q has %s rows of session %q already", core.ErrSessionExists, s.schema, t, sid)
		}
	}
	h := &sessionRec{Deleted: d.Deleted, Epoch: d.Epoch, UpdateTime: nanos(d.UpdateTime)}
	if !d.Deleted {
		// With the head's segments: a head whose segments do not count its
		// messages has them read from its latest revision instead.
		h = headRecOf(&d.HeadRecord)
	}
	if err := q.put(ctx, sessionKey(sid), h, true); err != nil {
		return err
	}
	for _, r := range d.Revisions {
		rec := revisionRec{
			Revision: r.Revision, Epoch: r.Epoch, Task: r.Task, Turn: r.Turn, TokensUsed: r.TokensUsed,
			MessageCount: r.MessageCount, StateJSON: r.StateJSON, Labels: maps.Clone(r.Labels), SaveTime: nanos(r.SaveTime),
		}
		for _, sg := range r.Segments {
			rec.Segments = append(rec.Segments, segment{FirstSeq: sg.FirstSeq, Count: sg.Count})
		}
		for _, u := range r.Pending {
			rec.Pending = append(rec.Pending, toolUseRecOf(u))
		}
		if err := q.put(ctx, revisionKey(sid, r.Revision), &rec, true); err != nil {
			return err
		}
	}
	for _, m := range d.Messages {
		if err := q.put(ctx, messageKey(sid, m.Seq), &messageRec{Role: m.Role, ContentJSON: m.ContentJSON}, true); err != nil {
			return err
		}
	}
	for _, c := range d.Ledger {
		if err := q.put(ctx, ledgerEntryKey(sid, c.ToolUseID), ledgerEntryRecOf(&c), true); err != nil {
			return err
		}
	}
	for _, r := range d.Requests {
		rec := requestRec{Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch, AlreadyBegun: r.AlreadyBegun}
		if err := q.put(ctx, requestKey(sid, r.RequestID), &rec, true); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// nanosOrZero is 0 for the zero time, which UnixNano does not give.
func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
