package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
)

// DeleteThread implements core.GraphStore: one transaction deletes the
// thread's rows and its uploads and leaves its head as the tombstone of the
// late-write rule.
func (s *Store) DeleteThread(ctx context.Context, thread string) error {
	return s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := s.deleteThread(ctx, tx, thread)
		return err
	})
}

// deleteThread locks and empties the thread, recording the greatest
// checkpoint id it held in its tombstone, and returns how many checkpoints
// it removed. A thread with no head and nothing stored keeps none.
func (s *Store) deleteThread(ctx context.Context, tx pgx.Tx, thread string) (int, error) {
	q := s.direct(tx)
	h, created, err := s.lockThread(ctx, q, thread)
	if err != nil {
		return 0, err
	}
	var top []byte
	if err := tx.QueryRow(ctx, "SELECT GREATEST((SELECT checkpoint_id FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1 ORDER BY checkpoint_id DESC LIMIT 1),"+
		" (SELECT checkpoint_id FROM "+s.table("graph_writes")+" WHERE thread_id = $1 ORDER BY checkpoint_id DESC LIMIT 1))", []byte(thread)).Scan(&top); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_uploads")+" WHERE thread_id = $1", []byte(thread)); err != nil {
		return 0, err
	}
	if created && top == nil {
		_, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_threads")+" WHERE thread_id = $1", []byte(thread))
		return 0, err
	}
	var removed int
	for _, t := range graphDataTables {
		tag, err := tx.Exec(ctx, "DELETE FROM "+s.table(t)+" WHERE thread_id = $1", []byte(thread))
		if err != nil {
			return 0, err
		}
		if t == "graph_checkpoints" {
			removed = int(tag.RowsAffected())
		}
	}
	n := threadRec{}
	if h != nil {
		n = *h
	}
	if top != nil {
		n.Deleted = true
		n.DeletedThrough = max(n.DeletedThrough, string(top))
	}
	return removed, s.putThread(ctx, q, thread, &n)
}

// CopyThread implements core.GraphStore: one transaction replaces target
// with the source's rows as of one snapshot (its ledger included, request
// ids not), keeping their ids.
func (s *Store) CopyThread(ctx context.Context, source, target string) (int, error) {
	if source == target {
		return 0, fmt.Errorf("%w: thread %q cannot be copied onto itself", core.ErrInvalidArgument, source)
	}
	var copied int
	err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		copied = 0
		// Lock both in thread id order, so that two copies cannot deadlock.
		first, second := source, target
		if second < first {
			first, second = second, first
		}
		for _, th := range []string{first, second} {
			if _, _, err := s.lockThread(ctx, s.direct(tx), th); err != nil {
				return err
			}
		}
		if _, err := s.deleteThread(ctx, tx, target); err != nil {
			return err
		}
		cols := map[string]string{
			"graph_blobs":       "ns, channel, version, record, data, checksum",
			"graph_writes":      "ns, checkpoint_id, task_id, idx, record, data, checksum",
			"graph_effects":     "ns, tool_use_id, record, data, checksum",
			"graph_checkpoints": "ns, checkpoint_id, run_id, record, data, checksum",
		}
		for _, t := range []string{"graph_blobs", "graph_writes", "graph_effects", "graph_checkpoints"} {
			tag, err := tx.Exec(ctx, "INSERT INTO "+s.table(t)+" (thread_id, "+cols[t]+") SELECT $2, "+cols[t]+" FROM "+s.table(t)+" WHERE thread_id = $1",
				[]byte(source), []byte(target))
			if err != nil {
				return err
			}
			if t == "graph_checkpoints" {
				copied = int(tag.RowsAffected())
			}
		}
		q := s.direct(tx)
		h, _, err := s.lockThread(ctx, q, target)
		if err != nil {
			return err
		}
		return s.putThread(ctx, q, target, h)
	})
	return copied, err
}

// Prune implements core.GraphStore, one transaction per thread.
func (s *Store) Prune(ctx context.Context, threads []string, strategy core.PruneStrategy) (int, error) {
	total := 0
	for _, thread := range threads {
		var n int
		err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			if strategy == core.PruneDelete {
				n, err = s.deleteThread(ctx, tx, thread)
				return err
			}
			n, err = s.removeCheckpoints(ctx, tx, thread, func(ns, id string, latest bool, c *graphCheckpointRec) bool { return !latest })
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// DeleteForRuns implements core.GraphStore.
func (s *Store) DeleteForRuns(ctx context.Context, runIDs []string) (int, error) {
	runs := map[string]bool{}
	ids := make([][]byte, len(runIDs))
	for i, r := range runIDs {
		runs[r] = true
		ids[i] = []byte(r)
	}
	var threads []string
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		threads = nil
		rows, err := tx.Query(ctx, "SELECT DISTINCT thread_id FROM "+s.table("graph_checkpoints")+" WHERE run_id = ANY($1::bytea[]) ORDER BY thread_id", ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var th []byte
			if err := rows.Scan(&th); err != nil {
				return err
			}
			threads = append(threads, string(th))
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, thread := range threads {
		var n int
		// Matched again under the thread's lock, from the records.
		err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if _, _, err := s.lockThread(ctx, s.direct(tx), thread); err != nil {
				return err
			}
			var err error
			n, err = s.removeCheckpoints(ctx, tx, thread, func(ns, id string, latest bool, c *graphCheckpointRec) bool {
				return runs[core.MetadataRunID(c.MetadataJSON)]
			})
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// removeCheckpoints locks the thread and deletes the checkpoints doomed
// picks, their writes, and the blobs of their namespaces that no remaining
// checkpoint references, in one transaction; it returns how many
// checkpoints it removed.
func (s *Store) removeCheckpoints(ctx context.Context, tx pgx.Tx, thread string, doomed func(ns, id string, latest bool, c *graphCheckpointRec) bool) (int, error) {
	if _, created, err := s.lockThread(ctx, s.direct(tx), thread); err != nil || created {
		if created {
			_, err = tx.Exec(ctx, "DELETE FROM "+s.table("graph_threads")+" WHERE thread_id = $1", []byte(thread))
		}
		return 0, err
	}
	rows, err := tx.Query(ctx, "SELECT ns, checkpoint_id, record FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1 ORDER BY ns, checkpoint_id DESC", []byte(thread))
	if err != nil {
		return 0, err
	}
	type ref struct{ ns, ch, ver string }
	referenced := map[ref]bool{}
	var gone []graphCandidate
	touched := map[string]bool{}
	prevNS, first := "", true
	for rows.Next() {
		var ns, id, rec []byte
		if err := rows.Scan(&ns, &id, &rec); err != nil {
			rows.Close()
			return 0, err
		}
		var c graphCheckpointRec
		if err := decodeJSON(rec, &c); err != nil {
			rows.Close()
			return 0, graphCorrupt(thread, err)
		}
		latest := first || string(ns) != prevNS
		first, prevNS = false, string(ns)
		if doomed(string(ns), string(id), latest, &c) {
			gone = append(gone, graphCandidate{thread, string(ns), string(id)})
			touched[string(ns)] = true
			continue
		}
		for ch, v := range c.ChannelVersions {
			referenced[ref{string(ns), ch, v}] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, g := range gone {
		for _, t := range []string{"graph_checkpoints", "graph_writes"} {
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.table(t)+" WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3",
				[]byte(thread), []byte(g.ns), []byte(g.id)); err != nil {
				return 0, err
			}
		}
	}
	for ns := range touched {
		brows, err := tx.Query(ctx, "SELECT channel, version FROM "+s.table("graph_blobs")+" WHERE thread_id = $1 AND ns = $2", []byte(thread), []byte(ns))
		if err != nil {
			return 0, err
		}
		var chs, vers [][]byte
		for brows.Next() {
			var ch, v []byte
			if err := brows.Scan(&ch, &v); err != nil {
				brows.Close()
				return 0, err
			}
			if !referenced[ref{ns, string(ch), string(v)}] {
				chs, vers = append(chs, ch), append(vers, v)
			}
		}
		brows.Close()
		if err := brows.Err(); err != nil {
			return 0, err
		}
		if len(chs) > 0 {
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_blobs")+" b USING unnest($3::bytea[], $4::bytea[]) AS u(channel, version)"+
				" WHERE b.thread_id = $1 AND b.ns = $2 AND b.channel = u.channel AND b.version = u.version",
				[]byte(thread), []byte(ns), chs, vers); err != nil {
				return 0, err
			}
		}
	}
	return len(gone), nil
}

// DeleteIdleThreads implements core.GraphStore. A thread's head records
// its last write (a put, writes, a ledger entry's begin or record, a copy
// into it); a thread idle since before cutoff is deleted behind a tombstone
// like any other, its ledger with it, a tombstone older than cutoff is
// removed (by then no late write of the deleted run is still on its way),
// and so is an upload started before cutoff, left by a savepointd that
// died.
func (s *Store) DeleteIdleThreads(ctx context.Context, cutoff time.Time) (int, error) {
	var idle []string
	err := s.graphRead(ctx, func(ctx context.Context, tx pgx.Tx) error {
		idle = nil
		rows, err := tx.Query(ctx, "SELECT thread_id, record FROM "+s.table("graph_threads")+" ORDER BY thread_id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var th, rec []byte
			if err := rows.Scan(&th, &rec); err != nil {
				return err
			}
			var h threadRec
			if decodeJSON(rec, &h) != nil {
				continue // a damaged head is left for Verify to report
			}
			if fromNanos(h.UpdateTime).Before(cutoff) {
				idle = append(idle, string(th))
			}
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	if err := s.dropStaleUploads(ctx, cutoff); err != nil {
		return 0, err
	}
	deleted := 0
	for _, thread := range idle {
		var n int
		err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			n = 0
			h, created, err := s.lockThread(ctx, s.direct(tx), thread)
			if err != nil || h == nil || created || !fromNanos(h.UpdateTime).Before(cutoff) {
				if created {
					_, err = tx.Exec(ctx, "DELETE FROM "+s.table("graph_threads")+" WHERE thread_id = $1", []byte(thread))
				}
				return err
			}
			var has bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table("graph_checkpoints")+" WHERE thread_id = $1)"+
				" OR EXISTS (SELECT 1 FROM "+s.table("graph_writes")+" WHERE thread_id = $1)"+
				" OR EXISTS (SELECT 1 FROM "+s.table("graph_blobs")+" WHERE thread_id = $1)"+
				" OR EXISTS (SELECT 1 FROM "+s.table("graph_effects")+" WHERE thread_id = $1)", []byte(thread)).Scan(&has); err != nil {
				return err
			}
			if !has {
				_, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_requests")+" WHERE thread_id = $1", []byte(thread))
				if err == nil {
					_, err = tx.Exec(ctx, "DELETE FROM "+s.table("graph_threads")+" WHERE thread_id = $1", []byte(thread))
				}
				return err
			}
			n = 1
			_, err = s.deleteThread(ctx, tx, thread)
			return err
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
	}
	return deleted, nil
}
