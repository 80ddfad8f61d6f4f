package core

import (
	"context"
	"sync"
	"time"
)

// SizeMaxAge is how old a size CachedSizer returns may be.
const SizeMaxAge = time.Second

// CachedSizer is a Sizer that asks its Source at most once per SizeMaxAge
// and answers the calls in between with that answer, error included: a
// store's size costs a directory walk or a catalog query, too much for a
// call a client may make as often as it likes (GetServerInfo).
type CachedSizer struct {
	Source Sizer
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu  sync.Mutex
	at  time.Time // when n and err were read; zero before the first read
	n   int64
	err error
}

// Size returns the Source's size as read at most SizeMaxAge ago. Callers
// arriving while it is read wait for that read.
func (c *CachedSizer) Size(ctx context.Context) (int64, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := now(); t.Sub(c.at) >= SizeMaxAge || t.Before(c.at) { // the zero at is long past
		c.n, c.err = c.Source.Size(ctx)
		c.at = now()
	}
	return c.n, c.err
}
