package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"

	"github.com/savepoint-dev/savepoint/internal/cli"
)

// runBackup writes the store's records to a new file, readable by its owner
// only: a backup is not encrypted, whatever the store's key.
func runBackup(store *badgerstore.Store, path string, stdout, stderr io.Writer) int {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "savepointd backup: %v (a backup never overwrites a file)\n", err)
		return exitFail
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = store.Backup(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		fmt.Fprintf(stderr, "savepointd backup: %v\n", err)
		return exitFail
	}
	fi, _ := os.Stat(path)
	fmt.Fprintf(stdout, "wrote backup %s (%d bytes, not encrypted: keep it as safe as the data)\n", path, fi.Size())
	return exitOK
}

// checkRestoreDir refuses a data directory that holds anything: a restore
// builds a new store.
func checkRestoreDir(dir string, stderr io.Writer) int {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "savepointd restore: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stderr, "savepointd restore: %s is not empty; restore into a new directory\n", dir)
	return exitData
}

// checkBackupFiles refuses backup files that do not exist, before restore
// creates anything; "-" is stdin.
func checkBackupFiles(paths []string) error {
	for _, path := range paths {
		if path == "-" {
			continue
		}
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("backup file %s does not exist; nothing was restored", path)
		case err != nil:
			return fmt.Errorf("%v; nothing was restored", err)
		case fi.IsDir():
			return fmt.Errorf("backup file %s is a directory; nothing was restored", path)
		}
	}
	return nil
}

// runRestore loads backup files into the new store, in order: a full one,
// then its incrementals. "-" is stdin.
func runRestore(store *badgerstore.Store, paths []string, stdout, stderr io.Writer) int {
	total := 0
	for _, path := range paths {
		var r io.Reader = os.Stdin
		name := "stdin"
		if path != "-" {
			f, err := os.Open(path)
			if err != nil {
				fmt.Fprintf(stderr, "savepointd restore: %v\n", err)
				return exitFail
			}
			defer f.Close()
			r, name = f, path
		}
		n, err := store.Restore(&progressReader{r: r, w: stderr, name: name, every: time.Second})
		total += n
		if err != nil {
			fmt.Fprintf(stderr, "savepointd restore: %s: %v (after %s; remove the directory and restore again)\n", name, err, cli.Count(total, "record"))
			return exitFail
		}
		fmt.Fprintf(stdout, "restored %s from %s\n", cli.Count(n, "record"), name)
	}
	fmt.Fprintf(stdout, "restored %s from %s; now run savepointd verify\n", cli.Count(total, "record"), cli.Count(len(paths), "file"))
	return exitOK
}

// progressReader passes r through, writing to w how much of name was read
// at most once every every (a long restore shows it is moving).
type progressReader struct {
	r     io.Reader
	w     io.Writer
	name  string
	every time.Duration
	n     int64
	shown time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if now := time.Now(); n > 0 && now.Sub(p.shown) >= p.every {
		p.shown = now
		fmt.Fprintf(p.w, "savepointd restore: %s: %.1f MiB read\n", p.name, float64(p.n)/(1<<20))
	}
	return n, err
}
