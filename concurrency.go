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
// is refused by TryAcquire; AcquireN waits until an entry goes idle.
//
// Create one with NewConcurrency; the zero value is not usable.
type ConcurrencyLimiter struct {
	l     *Limiter
	pool  sync.Pool // of *permitToken
	waits []waitList
	room  waitList // AcquireN on a new key refused for want of room (WithMaxKeys)
}

// waitList wakes the goroutines blocked in AcquireN: one per shard for
// keys whose slots are all held, and one limiter-wide for new keys that
// found no room under WithMaxKeys (room is limiter-wide: any key whose
// count drops to 0 can make way for any new key).
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
	c := &ConcurrencyLimiter{l: l, waits: make([]waitList, len(l.shards))}
	l.onRoom = c.wakeRoom
	return c, nil
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
	p, ok, _ := c.tryAcquire(key, n)
	return p, ok
}

// tryAcquire is TryAcquireN that also reports, on failure, whether the key
// was absent and the limiter had no room for it.
func (c *ConcurrencyLimiter) tryAcquire(key string, n int64) (Permit, bool, bool) {
	ok, noRoom := c.l.acquire(key, n)
	if !ok {
		return Permit{}, false, noRoom
	}
	tok, _ := c.pool.Get().(*permitToken)
	if tok == nil {
		tok = new(permitToken)
	}
	return Permit{c: c, tok: tok, gen: tok.gen.Load(), key: key, n: n}, true, false
}

// Acquire is AcquireN(ctx, key, 1).
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, key string) (Permit, error) {
	return c.AcquireN(ctx, key, 1)
}

// AcquireN takes n slots of key, waiting for releases until the context
// ends; then it returns the context's error and holds nothing. It returns
// ErrInvalidCost for n outside [1, Limit] and ErrKeyTooLong. A waiter on a
// key whose slots are held is woken by any release on the key's shard; a
// waiter on a new key that found no room under WithMaxKeys is woken by any
// release that leaves a key idle, and then looks at every entry for an
// idle one to replace (where TryAcquire looks at a sample). Woken waiters
// try again, so under contention the order is not first-come first-served.
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
		p, ok, noRoom := c.tryAcquire(key, n)
		if ok {
			return p, nil
		}
		// Register, then try again: a release after this point sees the
		// count and closes the channel we hold; one before it left what
		// the second try finds.
		ch := wl.register()
		var room chan struct{} // nil: not registered; never ready
		if noRoom {
			room = c.room.register()
		}
		p, ok, noRoom = c.tryAcquire(key, n)
		retry := false
		if !ok && noRoom {
			// The sample TryAcquire looks at may have missed an idle entry
			// (or the key went away meanwhile): look at all of them.
			retry = room == nil || c.l.evictIdle()
		}
		if !ok && !retry {
			select {
			case <-ch:
			case <-room:
			case <-ctx.Done():
			}
		}
		wl.n.Add(-1)
		if room != nil {
			c.room.n.Add(-1)
		}
		if ok {
			return p, nil
		}
	}
}

// wakeRoom wakes the waiters for room, if any: room was given back.
func (c *ConcurrencyLimiter) wakeRoom() {
	if c.room.n.Load() > 0 {
		c.room.wake()
	}
}

// register counts the caller as a waiter and returns the channel the next
// wake closes. The caller must take itself off (n.Add(-1)) when done.
func (wl *waitList) register() chan struct{} {
	wl.n.Add(1)
	wl.mu.Lock()
	if wl.ch == nil {
		wl.ch = make(chan struct{})
	}
	ch := wl.ch
	wl.mu.Unlock()
	return ch
}

// wake wakes every registered waiter.
func (wl *waitList) wake() {
	wl.mu.Lock()
	if wl.ch != nil {
		close(wl.ch)
		wl.ch = nil
	}
	wl.mu.Unlock()
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
	i, idle := c.l.release(p.key, p.n)
	if wl := &c.waits[i]; wl.n.Load() > 0 {
		wl.wake()
	}
	// An idle entry is room for a new key: wake the limiter-wide waiters.
	// Without WithMaxKeys there is always room, and nobody waits there.
	if idle && c.l.maxKeys > 0 {
		c.wakeRoom()
	}
	return true
}

// InFlight returns the number of key's slots held now.
func (c *ConcurrencyLimiter) InFlight(key string) int64 {
	if len(key) > MaxKeyLen {
		return 0
	}
	w, _, _ := c.l.word(key, 0)
	return int64(w)
}

// Limit returns the most operations in flight per key.
func (c *ConcurrencyLimiter) Limit() int64 { return c.l.p.Load().limit }

// SetLimit changes the limit while the limiter serves traffic. Operations
// in flight carry over: where more are in flight than the new limit, new
// acquisitions are refused until releases bring the count below it. A
// raised limit frees slots as releases do: it wakes every AcquireN waiting.
func (c *ConcurrencyLimiter) SetLimit(limit int64) error {
	if limit <= 0 || limit > maxReserve {
		return fmt.Errorf("hotlimit: concurrency limit must be in [1, %d], got %d", int64(maxReserve), limit)
	}
	if err := c.l.SetPolicy(concurrencyPolicy{limit}); err != nil {
		return err
	}
	for i := range c.waits {
		if wl := &c.waits[i]; wl.n.Load() > 0 {
			wl.wake()
		}
	}
	c.wakeRoom()
	return nil
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

// acquire takes n slots of key if they are free. noRoom reports a failure
// because the key was absent and WithMaxKeys left no room for it.
func (l *Limiter) acquire(key string, n int64) (ok, noRoom bool) {
	if n <= 0 || len(key) > MaxKeyLen {
		l.tally.count(false)
		return false, false
	}
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if n > t.p.limit {
		l.tally.count(false)
		return false, false
	}
	if sl := t.find(h, key); sl != nil {
		if ok, live := acquireAt(&sl.word, n, t.p.limit); live {
			l.tally.count(ok)
			return ok, false
		}
	}
	sl, _ := l.lockSlot(s, h, key, 0, 1)
	if sl != nil { // nil: no room under WithMaxKeys
		ok, _ = acquireAt(&sl.word, n, s.tab.Load().p.limit) // nothing retires while we hold s.mu
	}
	s.mu.Unlock()
	l.tally.count(ok)
	return ok, sl == nil
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
// the key's shard index and whether the count is now 0 (the entry idle).
func (l *Limiter) release(key string, n int64) (uint64, bool) {
	h := l.hash(key)
	i := h >> l.shift
	s := &l.shards[i]
	if sl := s.tab.Load().find(h, key); sl != nil {
		if idle, live := releaseAt(&sl.word, n); live {
			return i, idle
		}
	}
	// Moved by a rebuild, or not yet visible to the lock-free probe. An
	// entry with operations in flight is never removed, so it is there.
	idle := false
	if sl, _ := l.lockSlot(s, h, key, 0, 0); sl != nil {
		idle, _ = releaseAt(&sl.word, n)
	}
	s.mu.Unlock()
	return i, idle
}

// releaseAt lowers w by n, never below 0. idle reports that it is 0 after;
// live is false if w is retired.
func releaseAt(w *atomic.Uint64, n int64) (idle, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		next := old - min(old, uint64(n))
		if w.CompareAndSwap(old, next) {
			return next == 0, true
		}
	}
}
