package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "backup",
		example:  `savepoint backup > full.bak`,
		synopsis: "[--since V] [--plaintext] > FILE",
		summary:  "write a consistent backup of the running daemon's store to stdout",
		help: `
Writes a backup file of the whole store to stdout (the Backup RPC), taken
from one consistent snapshot while the daemon goes on serving. With --since
V, the version an earlier backup printed, only what was written since is
included: an incremental backup. savepointd restore --data-dir DIR FULL
INCREMENTAL... restores a full backup and then its incrementals, in order,
into a new directory.

The file is encrypted with the store's key (--encryption-key-file of
savepointd; restore needs the same key). A store without a key gives a
plaintext file, which the daemon refuses (PLAINTEXT_BACKUP) unless
--plaintext accepts it. A progress line goes to stderr, and at the end the
--since of the next incremental.`,
		setup: setupBackup,
	})
}

func setupBackup(fs *flag.FlagSet) runFunc {
	since := fs.Uint64("since", 0, "back up only what was written since `V`, the version a previous backup printed")
	plaintext := fs.Bool("plaintext", false, "accept a plaintext backup of a store without an encryption key")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("backup takes no arguments, got %q; redirect stdout to a file", args[0])
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		stream, err := c.Raw().Backup(ctx, &savepointv1.BackupRequest{SinceVersion: *since, Plaintext: *plaintext})
		if err != nil {
			return err
		}
		var n int64
		var last *savepointv1.BackupResponse
		shown := time.Now()
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if _, err := e.stdout.Write(r.GetData()); err != nil {
				return err
			}
			n += int64(len(r.GetData()))
			if time.Since(shown) > time.Second {
				fmt.Fprintf(e.stderr, "backup: %s written\n", sizeText(n))
				shown = time.Now()
			}
			last = r
		}
		if last == nil || last.GetNextSinceVersion() == 0 {
			return errors.New("the daemon ended the backup without its last response: the file is incomplete")
		}
		how := "plaintext (the store has no encryption key)"
		if last.GetEncrypted() {
			how = "encrypted with the store's key"
		}
		_, err = fmt.Fprintf(e.stderr, "backup: %s, %s; next incremental: savepoint backup --since %d\n", sizeText(n), how, last.GetNextSinceVersion())
		return err
	}
}

// sizeText is n bytes for people.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
