// Package wal is savepointd's write-ahead log, in front of Badger in the
// data directory's wal/ (docs/reliability.md, "The commit path"). Each
// group commit is one record, appended to the current segment and made
// durable by one fdatasync of it; the store applies it to Badger only
// then, syncs Badger in the background, and moves the mark to the LSN that
// sync covers. Open replays the records after the mark, checking each
// one's CRC and that its LSN follows the one before: the log ends at the
// first record that fails either, and nothing past it is read.
//
// The log knows nothing of what a record holds: its payload is the
// store's (badgerstore's commit payload). Its writer (Append, AppendRecord,
// Sync) is one goroutine's at a time; the rest may be called concurrently.
package wal

import (
	"errors"
	"hash/crc32"
	"os"
)

// ErrDamaged is returned, wrapped, when the log cannot be read where it
// must go on: a segment missing after the mark, or a record that does not
// authenticate with the key.
var ErrDamaged = errors.New("the write-ahead log is damaged")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// syncDir fsyncs the directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
