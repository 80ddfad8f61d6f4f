package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// An upload stages each value's bytes in graph_upload_chunks rows of
// graphChunkBytes, committed a few at a time (graphStageBytes), under a graph_uploads
// row that readers never look at. Commit then, in one transaction under the
// thread's lock, assembles each value from its chunks, writes the
// checkpoint and its blobs as PutCheckpoint does, and deletes the upload
// row (its chunks go with it, ON DELETE CASCADE): the checkpoint becomes
// visible with all its blobs at once. Each value is assembled by one
// statement, so the largest value must be read within the statement
// timeout (a 16 MiB value takes well under a second on a local server).
// DeleteThread and CopyThread delete the uploads of the thread they
// replace, whose Commit then fails with core.ErrUploadAborted. An upload
// left by a daemon that died is removed by the next Open of any daemon on
// the schema once it is older than staleUpload (uploads of live daemons on
// other hosts may be running meanwhile), and by DeleteIdleThreads once it
// is older than the idle cutoff.
const (
	graphChunkBytes = 1 << 20
	graphStageBytes = 4 << 20
	staleUpload     = 24 * time.Hour
)

// dropStaleUploads deletes the uploads started before cutoff, with their
// chunks.
func (s *Store) dropStaleUploads(ctx context.Context, cutoff time.Time) error {
	return s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_uploads")+" WHERE start_time < $1", cutoff)
		return err
	})
}

type graphUpload struct {
	s      *Store
	p      *core.GraphPut
	thread string
	id     []byte
	fp     hash.Hash // nil without a request id

	sizes  []int64 // declared: the checkpoint's value, then each blob's
	chunks []int32 // chunks staged per value
	cur    int
	got    int64
	buf    []byte
	done   bool

	pending     []stagedChunk // chunks not yet committed
	pendingSize int
}

type stagedChunk struct {
	value, seq int32
	data       []byte
}

// BeginUpload implements core.GraphStore.
func (s *Store) BeginUpload(ctx context.Context, p *core.GraphPut) (core.GraphUpload, error) {
	u := &graphUpload{s: s, p: p, thread: p.Checkpoint.ThreadID, id: make([]byte, 16)}
	if _, err := rand.Read(u.id); err != nil {
		return nil, err
	}
	if p.RequestID != "" {
		u.fp = p.Fingerprint()
	}
	u.sizes = append(u.sizes, p.Checkpoint.Value.Size)
	for _, b := range p.Blobs {
		u.sizes = append(u.sizes, b.Value.Size)
	}
	u.chunks = make([]int32, len(u.sizes))
	u.skipEmpty()
	err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_uploads")+" (upload_id, thread_id, start_time) VALUES ($1, $2, $3)", u.id, []byte(u.thread), s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (u *graphUpload) skipEmpty() {
	for u.cur < len(u.sizes) && u.got == u.sizes[u.cur] {
		u.cur++
		u.got = 0
	}
}

// Write implements core.GraphUpload.
func (u *graphUpload) Write(ctx context.Context, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.fp != nil {
		u.fp.Write(p)
	}
	for len(p) > 0 {
		if u.cur >= len(u.sizes) {
			return fmt.Errorf("%w: the upload sent more bytes than its start declares", core.ErrInvalidArgument)
		}
		n := min(int64(len(p)), u.sizes[u.cur]-u.got, int64(graphChunkBytes-len(u.buf)))
		u.buf = append(u.buf, p[:n]...)
		u.got += n
		p = p[n:]
		if len(u.buf) == graphChunkBytes || u.got == u.sizes[u.cur] {
			if err := u.stage(ctx); err != nil {
				return err
			}
		}
		u.skipEmpty()
	}
	return nil
}

// stage queues the buffered chunk, committing the queue once it holds
// graphStageBytes.
func (u *graphUpload) stage(ctx context.Context) error {
	u.pending = append(u.pending, stagedChunk{int32(u.cur), u.chunks[u.cur], u.buf})
	u.pendingSize += len(u.buf)
	u.chunks[u.cur]++
	u.buf = nil
	if u.pendingSize >= graphStageBytes {
		return u.flush(ctx)
	}
	return nil
}

// flush commits the queued chunks; the foreign key fails it once the
// upload row is gone (the thread was deleted or copied over).
func (u *graphUpload) flush(ctx context.Context) error {
	if len(u.pending) == 0 {
		return nil
	}
	err := u.s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, c := range u.pending {
			_, err := tx.Exec(ctx, "INSERT INTO "+u.s.table("graph_upload_chunks")+" (upload_id, value, seq, data) VALUES ($1, $2, $3, $4)",
				u.id, c.value, c.seq, c.data)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23503" {
				return u.aborted()
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	u.pending, u.pendingSize = nil, 0
	return err
}

func (u *graphUpload) aborted() error {
	return fmt.Errorf("%w: thread %q was deleted or copied over during the upload; nothing was stored", core.ErrUploadAborted, u.thread)
}

// Commit implements core.GraphUpload.
func (u *graphUpload) Commit(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if u.cur < len(u.sizes) {
		return false, fmt.Errorf("%w: the upload ended before every declared byte", core.ErrInvalidArgument)
	}
	if err := u.flush(ctx); err != nil {
		return false, err
	}
	var fp []byte
	if u.fp != nil {
		fp = u.fp.Sum(nil)
	}
	s := u.s
	var already bool
	err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		already = false
		h, _, err := s.lockThread(ctx, tx, u.thread)
		if err != nil {
			return err
		}
		var one int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM "+s.table("graph_uploads")+" WHERE upload_id = $1 FOR UPDATE", u.id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return u.aborted()
			}
			return err
		}
		if already, err = s.checkRequest(ctx, tx, u.thread, u.p.RequestID, fp); err != nil || already {
			return err
		}
		p := *u.p
		p.Blobs = append([]core.GraphBlob(nil), u.p.Blobs...)
		for i := range u.sizes {
			var data []byte
			if err := tx.QueryRow(ctx, "SELECT COALESCE(string_agg(data, ''::bytea ORDER BY seq), ''::bytea) FROM "+s.table("graph_upload_chunks")+
				" WHERE upload_id = $1 AND value = $2", u.id, int32(i)).Scan(&data); err != nil {
				return err
			}
			if int64(len(data)) != u.sizes[i] {
				return fmt.Errorf("upload of thread %q: value %d has %d bytes staged, %d declared", u.thread, i, len(data), u.sizes[i])
			}
			if i == 0 {
				p.Checkpoint.Value.Data = data
			} else {
				p.Blobs[i-1].Value.Data = data
			}
		}
		if err := s.putCheckpoint(ctx, tx, &p, h); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+s.table("graph_uploads")+" WHERE upload_id = $1", u.id); err != nil {
			return err
		}
		return s.putRequest(ctx, tx, u.thread, u.p.RequestID, fp)
	})
	if err != nil || already {
		return already, err // Abort removes the staged chunks
	}
	u.done = true
	return false, nil
}

// Abort implements core.GraphUpload.
func (u *graphUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.pending = nil
	err := u.s.graphTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM "+u.s.table("graph_uploads")+" WHERE upload_id = $1", u.id)
		return err
	})
	if err != nil {
		u.s.log.Error("remove an aborted upload's staged chunks; DeleteIdleThreads removes them later", "thread_id", u.thread, "err", err)
	}
}
