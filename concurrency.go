package hotlimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// ConcurrencyLimiter allows at most Limit operations in flight per key: an
// export endpoint may allow 2 running exports per tenant whatever their
// rate. Rate limiting and concurrency limiting are different things; use
// both when an operation is both frequent and expensive.
//
// It shares the rate limiters' keyed table: a key's state word is its
// number of operations in flight, acquired and released by CAS, with no
// lock and no allocation on an existing key. An entry with nothing in
// flight is fresh, and the sweeper removes it like an idle key. Under
// WithMaxKeys an entry with operations in flight is never evicted (its
// holders would release into a new entry and undercount it); when the
// sampled entries all have operations in flight, an acquire for a new key
// is refused rather than blocked.
//
// Create one with NewConcurrency; the zero value is not usable.
type ConcurrencyLimiter struct {
	l     *Limiter
	pool  sync.Pool // of *permitToken
	waits []waitList
}

// waitList wakes the goroutines blocked in Acquire on one shard's keys.
type waitList struct {
	n  atomic.Int64 // goroutines waiting, checked by every release
	mu sync.Mutex
	ch chan struct{} // closed and replaced by a release; nil: none yet
	_  [cacheLineSize - 24]byte
}

// permitToken makes Release idempotent. A Permit holds a token and the
// token's generation when it was issued; the first Release advances the
// generation by CAS, so every copy of that Permit is spent, and the token
// is then recycled for another Permit with the new generation.
type permitToken struct{ gen atomic.Uint64 }

// Permit is a held concurrency slot. Release it when the operation ends.
// Permits are values: copying one copies the right to release it once;
// whichever copy releases first wins and the others do nothing. The zero
// Permit holds nothing.
type Permit struct {
	c   *ConcurrencyLimiter
	tok *permitToken
	gen uint64
	key string
	n   int64
}

// NewConcurrency returns a limiter of limit operations in flight per key.
// It takes the same options as New (WithClock only times the sweeper's
// bookkeeping; nothing here depends on time).
func NewConcurrency(limit int64, opts ...Option) (*ConcurrencyLimiter, error) {
	if limit <= 0 || limit > maxReserve {
		return nil, fmt.Errorf("hotlimit: concurrency limit must be in [1, %d], got %d", int64(maxReserve), limit)
	}
	l, err := New(concurrencyPolicy{limit}, opts...)
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{l: l, waits: make([]waitList, len(l.shards))}, nil
}

// concurrencyPolicy is NewConcurrency's private policy for New.
type concurrencyPolicy struct{ limit int64 }

func (p concurrencyPolicy) params() (*params, error) {
	return &params{policy: p, kind: kindConcurrency, limit: p.limit}, nil
}

// TryAcquire is TryAcquireN(key, 1).
func (c *ConcurrencyLimiter) TryAcquire(key string) (Permit, bool) { return c.TryAcquireN(key, 1) }

// TryAcquireN takes n slots of key at once, or none, without blocking. It
// reports false if fewer than n are free, if n is not in [1, Limit], or if
// the key is longer than MaxKeyLen.
func (c *ConcurrencyLimiter) TryAcquireN(key string, n int64) (Permit, bool) {
	if !c.l.acquire(key, n) {
		return Permit{}, false
	}
	tok, _ := c.pool.Get().(*permitToken)
	if tok == nil {
		tok = new(permitToken)
	}
	return Permit{c: c, tok: tok, gen: tok.gen.Load(), key: key, n: n}, true
}

// Acquire is AcquireN(ctx, key, 1).
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, key string) (Permit, error) {
	return c.AcquireN(ctx, key, 1)
}

// AcquireN takes n slots of key, waiting for releases until the context
// ends; then it returns the context's error and holds nothing. It returns
// ErrInvalidCost for n outside [1, Limit] and ErrKeyTooLong. Waiters are
// woken by any release on their shard and try again, so under contention
// the order is not first-come first-served.
func (c *ConcurrencyLimiter) AcquireN(ctx context.Context, key string, n int64) (Permit, error) {
	if limit := c.Limit(); n <= 0 || n > limit {
		return Permit{}, fmt.Errorf("%w: %d slots, limit %d", ErrInvalidCost, n, limit)
	}
	if len(key) > MaxKeyLen {
		return Permit{}, ErrKeyTooLong
	}
	wl := &c.waits[c.l.hash(key)>>c.l.shift]
	for {
		if err := ctx.Err(); err != nil {
			return Permit{}, err
		}
		if p, ok := c.TryAcquireN(key, n); ok {
			return p, nil
		}
		// Register, then try again: a release after this point sees the
		// count and closes the channel we hold.
		wl.n.Add(1)
		wl.mu.Lock()
		if wl.ch == nil {
			wl.ch = make(chan struct{})
		}
		ch := wl.ch
		wl.mu.Unlock()
		if p, ok := c.TryAcquireN(key, n); ok {
			wl.n.Add(-1)
			return p, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
		wl.n.Add(-1)
	}
}

// Release gives the permit's slots back. Only the first Release of a
// permit (or of any copy of it) does anything; it reports whether this call
// was that one.
func (p Permit) Release() bool {
	if p.tok == nil || !p.tok.gen.CompareAndSwap(p.gen, p.gen+1) {
		return false
	}
	c := p.c
	c.pool.Put(p.tok)
	i := c.l.release(p.key, p.n)
	if wl := &c.waits[i]; wl.n.Load() > 0 {
		wl.mu.Lock()
		if wl.ch != nil {
			close(wl.ch)
			wl.ch = nil
		}
		wl.mu.Unlock()
	}
	return true
}

// InFlight returns the number of key's slots held now.
func (c *ConcurrencyLimiter) InFlight(key string) int64 {
	if len(key) > MaxKeyLen {
		return 0
	}
	w, _ := c.l.word(key, 0)
	return int64(w)
}

// Limit returns the most operations in flight per key.
func (c *ConcurrencyLimiter) Limit() int64 { return c.l.p.Load().limit }

// SetLimit changes the limit while the limiter serves traffic. Operations
// in flight carry over: where more are in flight than the new limit, new
// acquisitions are refused until releases bring the count below it.
func (c *ConcurrencyLimiter) SetLimit(limit int64) error {
	if limit <= 0 || limit > maxReserve {
		return fmt.Errorf("hotlimit: concurrency limit must be in [1, %d], got %d", int64(maxReserve), limit)
	}
	return c.l.SetPolicy(concurrencyPolicy{limit})
}

// Len returns the number of keys held: those with operations in flight,
// and those at zero that no sweep has removed yet.
func (c *ConcurrencyLimiter) Len() int { return c.l.Len() }

// Stats returns the counters: Allowed and Denied count acquisition
// attempts (each failed try inside AcquireN counts as a denial).
func (c *ConcurrencyLimiter) Stats() Stats { return c.l.Stats() }

// Sweep removes every key with nothing in flight and returns how many.
func (c *ConcurrencyLimiter) Sweep() int { return c.l.Sweep() }

// Close stops the background sweeper. Permits stay valid.
func (c *ConcurrencyLimiter) Close() error { return c.l.Close() }

// acquire takes n slots of key if they are free.
func (l *Limiter) acquire(key string, n int64) bool {
	if n <= 0 || len(key) > MaxKeyLen {
		l.tally.count(false)
		return false
	}
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if n > t.p.limit {
		l.tally.count(false)
		return false
	}
	if sl := t.find(h, key); sl != nil {
		if ok, live := acquireAt(&sl.word, n, t.p.limit); live {
			l.tally.count(ok)
			return ok
		}
	}
	sl, _ := l.slotLocked(s, h, key, 0, true)
	ok := false
	if sl != nil { // nil: no room under WithMaxKeys
		ok, _ = acquireAt(&sl.word, n, s.tab.Load().p.limit) // nothing retires while we hold s.mu
	}
	s.mu.Unlock()
	l.tally.count(ok)
	return ok
}

// acquireAt adds n to the in-flight count w if it stays within limit. live
// is false if the word is retired.
func acquireAt(w *atomic.Uint64, n, limit int64) (ok, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		if int64(old)+n > limit {
			return false, true
		}
		if w.CompareAndSwap(old, old+uint64(n)) {
			return true, true
		}
	}
}

// release takes n from key's in-flight count, never below 0, and returns
// the key's shard index.
func (l *Limiter) release(key string, n int64) uint64 {
	h := l.hash(key)
	i := h >> l.shift
	s := &l.shards[i]
	if sl := s.tab.Load().find(h, key); sl != nil && releaseAt(&sl.word, n) {
		return i
	}
	// Moved by a rebuild, or not yet visible to the lock-free probe. An
	// entry with operations in flight is never removed, so it is there.
	if sl, _ := l.slotLocked(s, h, key, 0, false); sl != nil {
		releaseAt(&sl.word, n)
	}
	s.mu.Unlock()
	return i
}

// releaseAt lowers w by n, never below 0; false if w is retired.
func releaseAt(w *atomic.Uint64, n int64) bool {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false
		}
		if w.CompareAndSwap(old, old-min(old, uint64(n))) {
			return true
		}
	}
}
