package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"
)

// A graph value over graphInlineBytes is never read with its row, so that
// the daemon never holds one whole: the row's query selects the value's
// length (valueSQL) and the value's bytes are read when they are asked
// for, in pieces of graphChunkBytes (substring), in the transaction that
// read the row. The row's checksum is checked as the pieces go by, before
// the last one is handed over. PostgreSQL slices a value it stored
// uncompressed without reading the rest of it; one it compressed is
// decompressed from its start up to each piece.
const graphInlineBytes = graphChunkBytes

// valueSQL selects the graph value in the column col: its bytes, NULL when
// it has more than limit, then its length.
func valueSQL(col string, limit int) string {
	return fmt.Sprintf("CASE WHEN octet_length(%[1]s) > %[2]d THEN NULL ELSE %[1]s END, octet_length(%[1]s)", col, limit)
}

// storedValue is a value as valueSQL selects it.
type storedValue struct {
	data []byte // nil when the value was left in the database
	size int32
}

// errHold reports a value too large to read with its row found by a read
// whose transaction ends before its values are read.
var errHold = errors.New("a large value is read in pieces, in the transaction that read its row")

// valueReader reads, in tx, the bytes of the large values of rows read in
// tx; a nil valueReader refuses them with errHold.
type valueReader struct {
	ctx context.Context
	tx  pgx.Tx
	s   *Store
}

// decode checks the row at k of thread (k.sum being its key parts but the
// value) and decodes its record rec into out, and returns its value v of
// type typ, read later through r when it was left in the database, the
// checksum sum then checked as it is read.
func (r *valueReader) decode(thread string, k rowKey, rec []byte, sum int64, v storedValue, out any) (func(typ string) core.GraphValue, error) {
	if v.data != nil || v.size == 0 {
		if err := decode(k.table, append(k.sum[:len(k.sum):len(k.sum)], v.data), rec, sum, out); err != nil {
			return nil, graphCorrupt(thread, err)
		}
		return func(typ string) core.GraphValue {
			return core.GraphValue{Type: typ, Size: int64(len(v.data)), Data: v.data}
		}, nil
	}
	if r == nil {
		return nil, errHold
	}
	if err := decodeJSON(rec, out); err != nil {
		return nil, graphCorrupt(thread, fmt.Errorf("%s row: %v", k.table, err))
	}
	return func(typ string) core.GraphValue {
		return core.ChunkedGraphValue(typ, int64(v.size), func(yield func([]byte) error) error {
			return r.pieces(thread, k, rec, sum, int64(v.size), yield)
		})
	}, nil
}

// pieces yields the size bytes of the value of the row at k in pieces, the
// last only once the row's checksum matched.
func (r *valueReader) pieces(thread string, k rowKey, rec []byte, sum, size int64, yield func([]byte) error) error {
	n := len(k.args)
	sql := fmt.Sprintf("SELECT substring(data FROM $%d::int FOR $%d::int) FROM %s WHERE %s", n+1, n+2, r.s.table(k.table), k.where())
	c := sumLength(checksumKey(k.table, k.sum), size)
	for off := int64(0); off < size; {
		want := min(size-off, graphChunkBytes)
		var piece []byte
		err := r.tx.QueryRow(r.ctx, sql, append(k.args[:n:n], off+1, want)...).Scan(&piece)
		if errors.Is(err, pgx.ErrNoRows) {
			return graphCorrupt(thread, fmt.Errorf("%s row: gone from its own snapshot while its value was read", k.table))
		}
		if err != nil {
			return err
		}
		if int64(len(piece)) != want {
			return graphCorrupt(thread, fmt.Errorf("%s row: a value of %d bytes has %d bytes at %d, want %d", k.table, size, len(piece), off, want))
		}
		c = crc32.Update(c, castagnoli, piece)
		if off += want; off == size {
			if got := int64(crc32.Update(c, castagnoli, rec)); got != sum {
				return graphCorrupt(thread, fmt.Errorf("%s row: checksum mismatch: stored %08x, computed %08x", k.table, uint32(sum), uint32(got)))
			}
		}
		if err := yield(piece); err != nil {
			return err
		}
	}
	return nil
}

// graphRowKey is the key of thread's row of table whose checksum key parts
// key are the columns keys names (graphKeyCols).
func graphRowKey(table, keys string, thread []byte, key [][]byte) rowKey {
	k := rowKey{table: table, cols: []string{"thread_id"}, args: []any{thread}, sum: key}
	if keys != "" {
		k.cols = append(k.cols, strings.Split(keys, ", ")...)
	}
	for _, p := range key {
		k.args = append(k.args, p)
	}
	return k
}
