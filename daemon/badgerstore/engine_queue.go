package badgerstore

import (
	"context"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// How a request reaches the committer. The right to commit is held by one
// goroutine at a time: a request that finds it free and nothing queued
// takes it and commits in its own goroutine (one session's save makes no
// hand-off of its own); the others queue, and the loop, handed the right
// by whoever holds it, folds the queue into batches until it is empty.

var errClosing = fmt.Errorf("%w: the store is closing", core.ErrUnavailable)

// send runs o and waits for its answer: in the caller's goroutine when o
// is a write and no commit is in flight or queued, else through the loop.
func (e *engine) send(ctx context.Context, o *op) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosing
	}
	if !e.busy && len(e.queue) == 0 && o.exclusive == nil && !o.probe {
		e.busy = true
		e.direct.Add(1)
		e.mu.Unlock()
		e.commitBatch([]*op{o})
		e.release()
		e.direct.Done()
		return <-o.done
	}
	e.queue = append(e.queue, o)
	if !e.busy {
		e.busy = true
		e.wake <- struct{}{}
	}
	e.mu.Unlock()
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the commit loop did not answer: %v", core.ErrUnavailable, ctx.Err())
	}
}

// release gives up the right to commit, handing it to the loop when
// requests queued meanwhile.
func (e *engine) release() {
	e.mu.Lock()
	if len(e.queue) > 0 {
		e.wake <- struct{}{}
	} else {
		e.busy = false
	}
	e.mu.Unlock()
}

// take removes the next batch from the queue: an exclusive request alone,
// or requests in order while they fit one transaction and one record. It
// returns nil, giving up the right to commit, when the queue is empty.
func (e *engine) take() []*op {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 {
		e.busy = false
		return nil
	}
	first := e.queue[0]
	n := 1
	if first.exclusive == nil {
		size, count, bytes := first.size, int64(len(first.writes)), first.logBytes
		for ; n < len(e.queue); n++ {
			o := e.queue[n]
			if o.exclusive != nil || size+o.size > e.maxSize || count+int64(len(o.writes)) > e.maxCount ||
				(e.wal != nil && bytes+o.logBytes > e.wal.SegmentSize()/4) {
				break // batches split only at request boundaries
			}
			size += o.size
			count += int64(len(o.writes))
			bytes += o.logBytes
		}
	}
	batch := append([]*op(nil), e.queue[:n]...)
	e.queue = e.queue[n:]
	return batch
}

// close stops the engine: no request is taken any more, those queued are
// answered UNAVAILABLE, and, unless it failed, a last checkpoint leaves
// nothing in the log for the next Open to replay.
func (e *engine) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	e.wg.Wait()
	e.direct.Wait()
	e.drain()
	if e.wal != nil {
		if e.err() == nil {
			err := e.checkpoint(false)
			if err == nil {
				_, applied := e.wal.Positions()
				err = e.wal.WriteMarkClean(applied, true)
			}
			if err != nil {
				e.fail(fmt.Errorf("checkpoint at close: %w", err))
			}
		}
		e.wal.Close()
	}
	if e.files != nil {
		e.files.close()
	}
}

func (e *engine) loop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.wake:
		case <-e.stop:
			return
		}
		for {
			select {
			case <-e.stop:
				return
			default:
			}
			batch := e.take()
			if batch == nil {
				break
			}
			if batch[0].exclusive != nil {
				e.cache.clear() // it may remove keys without a commit
				batch[0].done <- batch[0].exclusive()
				continue
			}
			e.commitBatch(batch)
		}
	}
}

// drain answers the requests still queued at close.
func (e *engine) drain() {
	e.mu.Lock()
	q := e.queue
	e.queue = nil
	e.mu.Unlock()
	for _, o := range q {
		o.done <- errClosing
	}
}
