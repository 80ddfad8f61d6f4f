package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
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
// visible with all its blobs at once. Each value is assembled by the
// statement that writes its row, in the server, so that the daemon never
// holds it whole (its checksum is computed as its chunks are staged); the
// largest value must be assembled within the statement timeout (a 16 MiB
// value takes well under a second on a local server).
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

// rowData is how a value's bytes reach its row: as a parameter, or, for an
// upload's value, assembled from its staged chunks by the statement that
// writes the row, so that the daemon never holds them whole.
type rowData struct {
	bytes []byte
	up    *stagedUpload // when not nil, value i of up
	i     int
}

// expr returns the SQL of the data column, its placeholders numbered from
// n, and their arguments.
func (d rowData) expr(n int) (string, []any) {
	if d.up == nil {
		return fmt.Sprintf("$%d", n), []any{nonNil(d.bytes)}
	}
	return fmt.Sprintf("(SELECT COALESCE(string_agg(data, ''::bytea ORDER BY seq), ''::bytea) FROM %s WHERE upload_id = $%d AND value = $%d)",
		d.up.s.table("graph_upload_chunks"), n, n+1), []any{d.up.id, int32(d.i)}
}

// checksum returns the checksum of the row at k with the record rec and
// these bytes.
func (d rowData) checksum(k rowKey, rec []byte) int64 {
	if d.up == nil {
		return checksum(k.table, append(k.sum[:len(k.sum):len(k.sum)], nonNil(d.bytes)), rec)
	}
	return int64(crc32.Update(d.up.sums[d.i], castagnoli, rec))
}

// inMemory gives the bytes of p's values, the checkpoint's first, as
// putCheckpoint takes them.
func inMemory(p *core.GraphPut) func(i int) rowData {
	return func(i int) rowData {
		if i == 0 {
			return rowData{bytes: p.Checkpoint.Value.Data}
		}
		return rowData{bytes: p.Blobs[i-1].Value.Data}
	}
}

// stagedUpload is what the uploads of a checkpoint and of writes share:
// chunks staged under a graph_uploads row that readers never look at.
type stagedUpload struct {
	*core.UploadStager
	s      *Store
	thread string
	id     []byte
	done   bool
	// sums are the checksums of the values' rows so far: each row's table
	// and key, then the value's bytes as they are staged; the record is
	// added when the row is written (rowData.checksum).
	sums []uint32
}

// beginStaged inserts the graph_uploads row of a new upload to thread of
// values of the given sizes, to be stored in the rows at keys.
func (s *Store) beginStaged(ctx context.Context, thread string, sizes []int64, keys []rowKey, digest hash.Hash) (*stagedUpload, error) {
	u := &stagedUpload{s: s, thread: thread, id: make([]byte, 16), sums: make([]uint32, len(sizes))}
	if _, err := rand.Read(u.id); err != nil {
		return nil, err
	}
	for i, k := range keys {
		u.sums[i] = sumLength(checksumKey(k.table, k.sum), sizes[i])
	}
	u.UploadStager = core.NewUploadStager(sizes, digest, graphChunkBytes, graphStageBytes, u.stage)
	err := s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+s.table("graph_uploads")+" (upload_id, thread_id, start_time) VALUES ($1, $2, $3)", u.id, []byte(u.thread), s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

type graphUpload struct {
	*stagedUpload
	p *core.GraphPut
}

// BeginUpload implements core.GraphStore.
func (s *Store) BeginUpload(ctx context.Context, p *core.GraphPut) (core.GraphUpload, error) {
	c := p.Checkpoint
	keys := []rowKey{checkpointKey(c.ThreadID, c.NS, c.ID)}
	for _, b := range p.Blobs {
		keys = append(keys, blobKey(c.ThreadID, c.NS, b.Channel, b.Version))
	}
	u, err := s.beginStaged(ctx, c.ThreadID, p.UploadSizes(), keys, p.UploadDigest())
	if err != nil {
		return nil, err
	}
	return &graphUpload{stagedUpload: u, p: p}, nil
}

// stage commits a batch of chunks, adding their bytes to their values'
// checksums; the foreign key fails it once the upload row is gone (the
// thread was deleted or copied over).
func (u *stagedUpload) stage(ctx context.Context, chunks []core.UploadChunk) error {
	for _, c := range chunks {
		u.sums[c.Value] = crc32.Update(u.sums[c.Value], castagnoli, c.Data)
	}
	return u.s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, c := range chunks {
			_, err := tx.Exec(ctx, "INSERT INTO "+u.s.table("graph_upload_chunks")+" (upload_id, value, seq, data) VALUES ($1, $2, $3, $4)",
				u.id, int32(c.Value), int32(c.Seq), c.Data)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23503" {
				return core.UploadAborted(u.thread)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// lockRow locks the upload's row, failing when it is gone: the thread was
// deleted or copied over meanwhile.
func (u *stagedUpload) lockRow(ctx context.Context, tx pgx.Tx) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM "+u.s.table("graph_uploads")+" WHERE upload_id = $1 FOR UPDATE", u.id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.UploadAborted(u.thread)
	}
	return err
}

// checkSizes fails when the chunks staged of a value do not add up to its
// declared size.
func (u *stagedUpload) checkSizes(ctx context.Context, tx pgx.Tx) error {
	n := len(u.sums)
	idx, sizes := make([]int32, n), make([]int64, n)
	for i := range n {
		idx[i], sizes[i] = int32(i), u.Size(i)
	}
	var i int32
	var got int64
	err := tx.QueryRow(ctx, "SELECT v.i, COALESCE(c.n, 0) FROM unnest($2::int[], $3::bigint[]) AS v(i, size) LEFT JOIN"+
		" (SELECT value, sum(octet_length(data)) AS n FROM "+u.s.table("graph_upload_chunks")+" WHERE upload_id = $1 GROUP BY value) c"+
		" ON c.value = v.i WHERE COALESCE(c.n, 0) <> v.size LIMIT 1", u.id, idx, sizes).Scan(&i, &got)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("upload of thread %q: value %d has %d bytes staged, %d declared", u.thread, i, got, u.Size(int(i)))
}

// data gives the values as the rows' statements assemble them.
func (u *stagedUpload) data(i int) rowData { return rowData{up: u, i: i} }

// deleteRow deletes the upload's row, and its chunks with it.
func (u *stagedUpload) deleteRow(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "DELETE FROM "+u.s.table("graph_uploads")+" WHERE upload_id = $1", u.id)
	return err
}

// Commit implements core.GraphUpload.
func (u *graphUpload) Commit(ctx context.Context) (bool, error) {
	fp, err := u.Finish(ctx)
	if err != nil {
		return false, err
	}
	s := u.s
	var already bool
	err = s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		already = false
		q := s.direct(tx)
		h, _, err := s.lockThread(ctx, q, u.thread)
		if err != nil {
			return err
		}
		if err := u.lockRow(ctx, tx); err != nil {
			return err
		}
		if already, err = s.checkRequest(ctx, q, u.thread, u.p.RequestID, fp); err != nil || already {
			return err
		}
		if err := u.checkSizes(ctx, tx); err != nil {
			return err
		}
		if err := s.putCheckpoint(ctx, q, u.p, h, u.data); err != nil {
			return err
		}
		if err := u.deleteRow(ctx, tx); err != nil {
			return err
		}
		return s.putRequest(ctx, q, u.thread, u.p.RequestID, fp)
	})
	if err != nil || already {
		return already, err // Abort removes the staged chunks
	}
	u.done = true
	return false, nil
}

type writesUpload struct {
	*stagedUpload
	w *core.GraphWrites
}

// BeginWritesUpload implements core.GraphStore.
func (s *Store) BeginWritesUpload(ctx context.Context, w *core.GraphWrites) (core.GraphWritesUpload, error) {
	keys := make([]rowKey, len(w.Writes))
	for i, x := range w.Writes {
		keys[i] = writeKey(w.ThreadID, w.NS, w.CheckpointID, w.TaskID, x.Idx)
	}
	u, err := s.beginStaged(ctx, w.ThreadID, w.UploadSizes(), keys, w.UploadDigest())
	if err != nil {
		return nil, err
	}
	return &writesUpload{stagedUpload: u, w: w}, nil
}

// Commit implements core.GraphWritesUpload: in one transaction under the
// thread's lock, each write's value assembled from its chunks and stored as
// PutWrites stores it, and the upload row deleted with its chunks.
func (u *writesUpload) Commit(ctx context.Context) (core.GraphWritesResult, error) {
	fp, err := u.Finish(ctx)
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	var res core.GraphWritesResult
	err = u.s.graphTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		q := u.s.direct(tx)
		if _, _, err := u.s.lockThread(ctx, q, u.thread); err != nil {
			return err
		}
		if err := u.lockRow(ctx, tx); err != nil {
			return err
		}
		if err := u.checkSizes(ctx, tx); err != nil {
			return err
		}
		if err := u.s.putWrites(ctx, q, u.w, fp, u.data, &res); err != nil {
			return err
		}
		return u.deleteRow(ctx, tx)
	})
	if err != nil {
		return core.GraphWritesResult{}, err
	}
	u.done = true
	return res, nil
}

// Abort implements core.GraphUpload and core.GraphWritesUpload.
func (u *stagedUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.Discard()
	err := u.s.graphTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM "+u.s.table("graph_uploads")+" WHERE upload_id = $1", u.id)
		return err
	})
	if err != nil {
		u.s.log.Error("remove an aborted upload's staged chunks; DeleteIdleThreads removes them later", "thread_id", u.thread, "err", err)
	}
}
