package badgerstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HWMFile is the file beside the data that records the sequence number of
// the highest durable commit, so that a store rolled back behind it (Badger
// silently drops a log's tail after a bad checksum) is refused at Open.
const HWMFile = "savepoint.hwm"

// hwmInterval is how often at most the high-water mark file is rewritten.
const hwmInterval = time.Second

// hwm rewrites the high-water mark file off the commit path: at most once an
// interval, and only with a sequence number already durable. A failed
// write is retried every interval until one succeeds; report is told the
// outcome of every attempt.
type hwm struct {
	dir     string
	latest  atomic.Uint64
	written uint64
	stop    chan struct{}
	wg      sync.WaitGroup
	report  func(error) // nil for a written mark
	// write replaces the file; writeHWM, or a failing stand-in in tests.
	write atomic.Pointer[func(dir string, seq uint64) error]
	// lock, when set, is held while the file is replaced: the engine's
	// checkpoint lock, so that the directory sync that ends the rewrite
	// never comes while a value-log GC moves values (a table a memtable
	// flush made then would become durable before the moved values).
	lock sync.Locker
}

// newHWM returns the mark of dir, last written at seq; start begins its
// rewrites.
func newHWM(dir string, seq uint64) *hwm {
	h := &hwm{dir: dir, written: seq, stop: make(chan struct{})}
	h.latest.Store(seq)
	w := writeHWM
	h.write.Store(&w)
	return h
}

// start begins the rewrites, each outcome passed to report.
func (h *hwm) start(report func(error)) {
	h.report = report
	h.wg.Add(1)
	go h.loop()
}

func (h *hwm) loop() {
	defer h.wg.Done()
	t := time.NewTicker(hwmInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.flush()
		case <-h.stop:
			h.flush()
			return
		}
	}
}

func (h *hwm) flush() {
	seq := h.latest.Load()
	if seq == h.written {
		return
	}
	if h.lock != nil {
		h.lock.Lock()
		defer h.lock.Unlock()
	}
	if err := (*h.write.Load())(h.dir, seq); err != nil {
		h.report(err)
		return
	}
	h.written = seq
	h.report(nil)
}

func (h *hwm) close() {
	close(h.stop)
	h.wg.Wait()
}

// readHWM returns the recorded high-water mark; found is false when the file
// does not exist.
func readHWM(dir string) (seq uint64, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, HWMFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	seq, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", HWMFile, err)
	}
	return seq, true, nil
}

// writeHWM replaces the file atomically and durably.
func writeHWM(dir string, seq uint64) error {
	return replaceFile(dir, HWMFile, fmt.Appendf(nil, "%d\n", seq))
}

// replaceFile replaces the file name in dir with data, atomically and
// durably: a temporary file written and synced, renamed over it, and the
// directory synced.
func replaceFile(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
