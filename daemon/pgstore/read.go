package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Reads run in a read-only snapshot (Store.read), outside the group commit.

func (s *Store) Checkpoint(ctx context.Context, sessionID string, revision uint64) (core.Checkpoint, error) {
	var cp core.Checkpoint
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, false)
		if err != nil {
			return err
		}
		cp, err = q.checkpoint(ctx, sessionID, h, revision)
		return err
	})
	return cp, err
}

func (q *query) checkpoint(ctx context.Context, sessionID string, h *sessionRec, rev uint64) (core.Checkpoint, error) {
	rec, err := q.revision(ctx, sessionID, h, rev)
	if err != nil {
		return core.Checkpoint{}, err
	}
	hr, r := headOf(h, nil), revisionOf(rec)
	return core.CheckpointOf(sessionID, &hr, &r), nil
}

// messagePage bounds the rows one query of Messages reads.
const messagePage = 256

func (s *Store) Messages(ctx context.Context, sessionID string, rev, start uint64, maxBytes, maxCount int) ([]core.Message, error) {
	var page core.MessagePage
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, false)
		if err != nil {
			return err
		}
		rec, err := q.revision(ctx, sessionID, h, rev)
		if err != nil {
			return err
		}
		page = core.MessagePage{MaxBytes: maxBytes, MaxCount: maxCount} // afresh if fn runs again
		for next, end := range core.SeqRanges(segmentsOf(rec.Segments), start) {
			for next < end {
				full, err := q.messages(ctx, sessionID, h, rec.Revision, next, min(end, next+messagePage), page.Add)
				if err != nil || full {
					return err
				}
				next = min(end, next+messagePage)
			}
		}
		return nil
	})
	return page.Messages, err
}

// messages passes the messages seq in [from, to) to add in order until add
// returns false (full); a missing message is core.ErrCheckpointCorrupt.
func (q *query) messages(ctx context.Context, sessionID string, h *sessionRec, rev, from, to uint64, add func(core.Message) bool) (full bool, err error) {
	rows, err := q.tx.Query(ctx, "SELECT seq, record, checksum FROM "+q.s.table("messages")+
		" WHERE session_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq", []byte(sessionID), int64(from), int64(to))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	want := from
	for rows.Next() {
		var seq, sum int64
		var rec []byte
		if err := rows.Scan(&seq, &rec, &sum); err != nil {
			return false, err
		}
		if uint64(seq) != want {
			return false, corrupt(h, sessionID, fmt.Errorf("message %d of revision %d is missing", want, rev))
		}
		want++
		var m messageRec
		if err := decode("messages", messageKey(sessionID, uint64(seq)).sum, rec, sum, &m); err != nil {
			return false, corrupt(h, sessionID, err)
		}
		if !add(core.Message{Role: m.Role, ContentJSON: m.ContentJSON}) {
			return true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if want != to {
		return false, corrupt(h, sessionID, fmt.Errorf("message %d of revision %d is missing", want, rev))
	}
	return false, nil
}

func (s *Store) PendingToolUses(ctx context.Context, sessionID string) (uint64, []core.PendingToolUse, error) {
	var rev uint64
	var calls []core.PendingToolUse
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, false)
		if err != nil {
			return err
		}
		hr := headOf(h, nil)
		rev, calls, err = core.PendingToolUses(&domainTxn{ctx: ctx, q: q, rec: h}, sessionID, &hr)
		return err
	})
	return rev, calls, err
}

// listPage is how many session rows ListSessions reads per query; tombstones
// and sessions the label filter drops are read past.
const listPage = 256

func (s *Store) ListSessions(ctx context.Context, after string, limit int, filter core.SessionFilter) ([]core.SessionSummary, error) {
	var out []core.SessionSummary
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		out = out[:0]
		cursor := []byte(after)
		for len(out) < limit {
			page, err := q.keyedRows(ctx, "SELECT session_id, record, checksum FROM "+s.table("sessions")+
				" WHERE session_id > $1 ORDER BY session_id LIMIT $2", cursor, max(listPage, limit))
			if err != nil {
				return err
			}
			if len(page) == 0 {
				return nil
			}
			cursor = page[len(page)-1].key
			for _, r := range page {
				if len(out) >= limit {
					break
				}
				id := string(r.key)
				var h sessionRec
				if err := decode("sessions", sessionKey(id).sum, r.rec, r.sum, &h); err != nil {
					// A damaged head is listed so an operator can find and delete it.
					out = append(out, core.SessionSummary{SessionID: id})
					continue
				}
				if ss, ok, err := q.listed(ctx, id, &h, filter); err != nil {
					return err
				} else if ok {
					out = append(out, ss)
				}
			}
		}
		return nil
	})
	return out, err
}

// listed returns the summary of the session whose head is h when ListSessions
// lists it: live, and passing filter.
func (q *query) listed(ctx context.Context, sid string, h *sessionRec, filter core.SessionFilter) (core.SessionSummary, bool, error) {
	if h.Deleted {
		return core.SessionSummary{}, false, nil
	}
	hr := headOf(h, nil)
	if !filter.Selects(&hr) {
		return core.SessionSummary{}, false, nil
	}
	inDoubt, err := core.InDoubt(&domainTxn{ctx: ctx, q: q, rec: h}, sid, &hr)
	if err != nil {
		return core.SessionSummary{}, false, err
	}
	return core.SummaryOf(sid, &hr, inDoubt), true, nil
}

func (s *Store) Summary(ctx context.Context, sessionID string) (core.SessionSummary, error) {
	var out core.SessionSummary
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, false)
		if errors.Is(err, core.ErrCheckpointCorrupt) {
			out = core.SessionSummary{SessionID: sessionID} // as ListSessions lists it
			return nil
		}
		if err != nil {
			return err
		}
		hr := headOf(h, nil)
		inDoubt, err := core.InDoubt(&domainTxn{ctx: ctx, q: q, rec: h}, sessionID, &hr)
		if err != nil {
			return err
		}
		out = core.SummaryOf(sessionID, &hr, inDoubt)
		return nil
	})
	return out, err
}

// ListSessionsByUpdate implements core.Store, reading the index on
// (neg_update_ns, session_id) from the cursor, or with filter.UpdatedBefore
// from the first session updated before it, whichever is further; a head
// that cannot be decoded is listed with its id and its row's time.
func (s *Store) ListSessionsByUpdate(ctx context.Context, after core.UpdateCursor, limit int, filter core.SessionFilter) ([]core.SessionSummary, error) {
	negNs, id := int64(math.MinInt64), []byte{}
	if after != (core.UpdateCursor{}) {
		negNs, id = -unixNanos(after.UpdateTime), []byte(after.SessionID)
	}
	if !filter.UpdatedBefore.IsZero() {
		// Rows with neg_update_ns > -before, none of which ties with it.
		if first := -unixNanos(filter.UpdatedBefore); first > negNs || (first == negNs && len(id) == 0) {
			negNs, id = first, nil
		}
	}
	var out []core.SessionSummary
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		out = out[:0]
		curNs, curID := negNs, id
		for len(out) < limit {
			args := []any{max(listPage, limit), curNs, curID}
			if curID == nil {
				args = args[:2]
			}
			rows, err := q.tx.Query(ctx, s.byUpdateSQL(curID != nil), args...)
			if err != nil {
				return err
			}
			type row struct {
				id, rec []byte
				sum     int64
				neg     int64
			}
			page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
				var x row
				err := r.Scan(&x.id, &x.rec, &x.sum, &x.neg)
				return x, err
			})
			if err != nil {
				return err
			}
			if len(page) == 0 {
				return nil
			}
			last := page[len(page)-1]
			curNs, curID = last.neg, last.id
			for _, r := range page {
				if len(out) >= limit {
					break
				}
				sid := string(r.id)
				var h sessionRec
				if err := decode("sessions", sessionKey(sid).sum, r.rec, r.sum, &h); err != nil {
					// A damaged head is listed so an operator can find and delete it.
					out = append(out, core.SessionSummary{SessionID: sid, UpdateTime: fromNanos(-r.neg)})
					continue
				}
				if ss, ok, err := q.listed(ctx, sid, &h, filter); err != nil {
					return err
				} else if ok {
					out = append(out, ss)
				}
			}
		}
		return nil
	})
	return out, err
}

// byUpdateSQL is ListSessionsByUpdate's query of one page ($1 rows): after
// the cursor ($2, $3), or without an id (the min_idle bound) after the time
// $2. Both read the partial index on (neg_update_ns, session_id) in order.
func (s *Store) byUpdateSQL(withID bool) string {
	cond := "neg_update_ns > $2"
	if withID {
		cond = "(neg_update_ns, session_id) > ($2, $3)"
	}
	return "SELECT session_id, record, checksum, neg_update_ns FROM " + s.table("sessions") +
		" WHERE neg_update_ns IS NOT NULL AND " + cond + " ORDER BY neg_update_ns, session_id LIMIT $1"
}

// unixNanos is t in Unix nanoseconds, 0 for a zero time, as records hold it.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (s *Store) LedgerToolUses(ctx context.Context, sessionID string, ids []string) (uint64, []core.PendingToolUse, error) {
	var rev uint64
	var calls []core.PendingToolUse
	err := s.read(ctx, func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, sessionID, false)
		if err != nil {
			return err
		}
		hr := headOf(h, nil)
		rev, calls, err = core.LedgerToolUses(&domainTxn{ctx: ctx, q: q, rec: h}, sessionID, &hr, ids)
		return err
	})
	return rev, calls, err
}
