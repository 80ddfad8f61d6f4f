package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "backup",
		example:  `savepoint backup -o full.bak`,
		synopsis: "[--since V] [--require-encrypted] [-o FILE | > FILE]",
		summary:  "write a consistent backup of the running daemon's store to FILE or stdout",
		help: `
Writes a backup file of the whole store (the Backup RPC), taken from one
consistent snapshot while the daemon goes on serving, to FILE with -o, else
to stdout. With --since V, the version an earlier backup printed, only what
was written since is included: an incremental backup. savepointd restore
--data-dir DIR FULL INCREMENTAL... restores a full backup and then its
incrementals, in order, into a new directory.

The file is as encrypted as the store: with the store's key
(--encryption-key-file of savepointd; restore needs the same key), or, for a
store without one, plaintext, said in one line on stderr; keep such a file
as safe as the data. --require-encrypted refuses a plaintext backup instead.

-o FILE writes to a temporary name beside FILE and gives it its name only
once the backup is complete, so a failed backup leaves no FILE behind; it
never overwrites one. (With > FILE the shell creates the file first, and a
failure leaves it empty or partial.) A progress line goes to stderr, and at
the end the --since of the next incremental.`,
		setup: setupBackup,
	})
}

func setupBackup(fs *flag.FlagSet) runFunc {
	since := fs.Uint64("since", 0, "back up only what was written since `V`, the version a previous backup printed")
	requireEncrypted := fs.Bool("require-encrypted", false, "refuse a plaintext backup, of a store without an encryption key")
	output := fs.String("o", "", "write the backup to the new `FILE`, complete or not at all, instead of stdout")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("backup takes no arguments, got %q; give -o FILE or redirect stdout to a file", args[0])
		}
		w := e.stdout
		var out *outputFile
		if *output != "" {
			var err error
			if out, err = createOutput(*output); err != nil {
				return err
			}
			defer out.abort() // a no-op once committed
			w = out.f
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		res, err := streamBackup(ctx, c, w, e.stderr, &savepointv1.BackupRequest{SinceVersion: *since, Plaintext: !*requireEncrypted})
		if errors.Is(err, client.ErrPlaintextBackup) {
			return fmt.Errorf("the store has no encryption key, and --require-encrypted refuses its plaintext backup; nothing was written. " +
				"Drop --require-encrypted, or encrypt the store (docs/security.md, \"Converting: backup and restore\") (PLAINTEXT_BACKUP)")
		}
		if err != nil {
			return err
		}
		if out != nil {
			if err := out.commit(); err != nil {
				return err
			}
		}
		how := "encrypted with the store's key"
		if !res.encrypted {
			how = "plaintext"
			fmt.Fprintln(e.stderr, "backup: the store has no encryption key, so this backup is plaintext: keep it as safe as the data, "+
				"or encrypt the store (docs/security.md, \"Converting: backup and restore\")")
		}
		_, err = fmt.Fprintf(e.stderr, "backup: %s, %s; next incremental: savepoint backup --since %d\n", sizeText(res.size), how, res.next)
		return err
	}
}

// backupResult is what a finished backup stream said.
type backupResult struct {
	size      int64
	encrypted bool   // whether the file is encrypted with the store's key
	next      uint64 // from the last response: the --since of the next incremental
}

// streamBackup writes the Backup stream's data to w, with a progress line on
// progress every second.
func streamBackup(ctx context.Context, c *client.Client, w, progress io.Writer, req *savepointv1.BackupRequest) (backupResult, error) {
	var res backupResult
	stream, err := c.Raw().Backup(ctx, req)
	if err != nil {
		return res, err
	}
	shown := time.Now()
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		res.encrypted = res.encrypted || r.GetEncrypted() // the daemon sets it in the last response
		if _, err := w.Write(r.GetData()); err != nil {
			return res, err
		}
		res.size += int64(len(r.GetData()))
		if time.Since(shown) > time.Second {
			fmt.Fprintf(progress, "backup: %s written\n", sizeText(res.size))
			shown = time.Now()
		}
		res.next = r.GetNextSinceVersion()
	}
	if res.next == 0 {
		return res, errors.New("the daemon ended the backup without its last response: the backup is incomplete")
	}
	return res, nil
}

// outputFile is a file written under a temporary name in the directory of
// its path, and given its path only when complete.
type outputFile struct {
	f    *os.File
	path string
	done bool
}

// createOutput starts the file path, refusing one that exists.
func createOutput(path string) (*outputFile, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s exists; a backup never overwrites a file", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, err
	}
	return &outputFile{f: f, path: path}, nil
}

// commit syncs the file and gives it its path, which must still not exist.
func (o *outputFile) commit() error {
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(o.f.Name(), o.path) // unlike a rename, never replaces a file
	}
	if err != nil {
		return fmt.Errorf("%w; no backup file was left", err)
	}
	o.done = true
	os.Remove(o.f.Name())
	return nil
}

// abort removes the temporary file of an unfinished backup.
func (o *outputFile) abort() {
	if !o.done {
		o.f.Close()
		os.Remove(o.f.Name())
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
