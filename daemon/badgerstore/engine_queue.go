package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// How a request reaches the log: leader and follower group commit, as
// RocksDB's write thread and MySQL's binlog group commit do. Every request
// joins the queue. The one that finds no commit in progress becomes the
// leader: it takes a batch from the queue's head (itself first), writes
// and syncs it on its own goroutine and answers it. Requests that arrive
// meanwhile wait as followers; when the leader is done it makes the
// follower at the queue's head the next leader, which commits the batch
// that queued behind it. No goroutine of the store's own sits between a
// request and its commit: a lone save wakes nothing, and a batch wakes
// only the requests it answers.

var errClosing = fmt.Errorf("%w: the store is closing", core.ErrUnavailable)

// errLead, sent on a queued request's done channel, makes the goroutine
// waiting on it the leader; it never reaches a caller.
var errLead = errors.New("lead the next batch")

// send runs o and waits for its answer, leading the batch it is in when no
// commit is in progress, or when made leader while it waits.
func (e *engine) send(ctx context.Context, o *op) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosing
	}
	e.queue = append(e.queue, o)
	if !e.busy {
		e.busy = true
		o.lead = true
		e.leaders.Add(1)
		e.mu.Unlock()
		e.lead()
		return <-o.done
	}
	e.mu.Unlock()
	select {
	case err := <-o.done:
		if err == errLead {
			e.lead()
			return <-o.done
		}
		return err
	case <-ctx.Done():
	}
	// Given up on: leave the queue unless already made leader, in which
	// case lead all the same, for those queued behind.
	e.mu.Lock()
	lead := o.lead
	if i := slices.Index(e.queue, o); i >= 0 && !lead {
		e.queue = slices.Delete(e.queue, i, i+1)
	}
	e.mu.Unlock()
	if lead {
		go func() {
			if <-o.done == errLead {
				e.lead()
			}
		}()
	}
	return fmt.Errorf("%w: the commit in progress did not answer: %v", core.ErrUnavailable, ctx.Err())
}

// lead commits the batch at the queue's head (whose first request is the
// leader's) and then hands leadership on.
func (e *engine) lead() {
	batch := e.take()
	if batch[0].exclusive != nil {
		e.cache.clear() // it may remove keys without a commit
		batch[0].done <- batch[0].exclusive()
	} else {
		e.commitBatch(batch)
	}
	e.handOff()
}

// handOff makes the request at the queue's head the next leader, or, with
// the queue empty, leaves no commit in progress. Once the store is closing
// the requests queued are answered UNAVAILABLE instead.
func (e *engine) handOff() {
	e.mu.Lock()
	if len(e.queue) == 0 || e.closed {
		q := e.queue
		e.queue, e.busy = nil, false
		e.mu.Unlock()
		for _, o := range q {
			o.done <- errClosing
		}
		e.leaders.Done()
		return
	}
	next := e.queue[0]
	next.lead = true
	e.mu.Unlock()
	next.done <- errLead
}

// take removes the next batch from the queue, which is not empty: an
// exclusive request alone, or requests in order while they fit one
// transaction and one record.
func (e *engine) take() []*op {
	e.mu.Lock()
	defer e.mu.Unlock()
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
	batch := slices.Clone(e.queue[:n])
	e.queue = slices.Delete(e.queue, 0, n)
	return batch
}

// close stops the engine: no request is taken any more, the commit in
// progress ends, those queued are answered UNAVAILABLE, and, unless it
// failed, a last checkpoint leaves nothing in the log for the next Open to
// replay.
func (e *engine) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	e.wg.Wait()
	e.leaders.Wait()
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
