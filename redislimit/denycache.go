package redislimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// denyCache is the in-process tier of the two-tier mode: it remembers,
// per key, that a request of some cost was denied by Redis and will not be
// admitted before an instant, and answers such requests locally until
// then.
//
// This is sound because a denial's RetryAfter, counted from when the
// request was sent, is a lower bound for the same request: other requests
// can only consume more and push it later. It answers only that request
// (the same cost): a larger cost needs longer, by an amount only Redis
// knows, and a smaller one may be admitted sooner. Give-backs and Reset, which give quota back, drop the key's entry on
// this instance; on other instances the entry stays until its RetryAfter.
// A lost Redis state (a flush, a failover, a restart) can only make the
// cache deny longer than Redis would, never admit more; a call that finds
// the server unreachable empties the caches of its layers, and Reset or
// ForgetDenials empties them on demand.
//
// Memory is bounded: at most max entries in all, and every key can be
// cached (there are never more stripes than max). A full stripe first
// drops its expired entries, then an arbitrary one.
//
// Instants come from the process's monotonic clock; only differences
// between two readings of it are used, so its origin (and any skew against
// other processes or the Redis server) does not matter.
type denyCache struct {
	seed   maphash.Seed
	now    func() time.Duration // replaced by tests
	mask   uint64               // len(shards)-1
	shards []denyShard
}

// maxDenyShards is the most stripes a denyCache has: enough that two
// cores rarely contend on one lock.
const maxDenyShards = 16

// denyShard is one lock stripe of a denyCache.
type denyShard struct {
	mu  sync.Mutex
	m   map[string]denial // guarded by mu
	max int               // entries this stripe may hold; the stripes' sum is the cache's bound
	_   [64]byte          // keep neighbouring stripes' locks off one cache line
}

// denial is a cached denial of a call: until until, the same call (cost
// cost in the layer that denied) is denied, with the
// Decision's other fields as recorded (rem, limit, the reset instant and
// the binding layer). shape identifies the call's other layers (their
// limiters, keys and costs, see shapeOf); 0 for a call of one layer.
type denial struct {
	until, resetAt   time.Duration
	cost, rem, limit int64
	binding          int
	shape            uint64
}

func newDenyCache(maxKeys int) *denyCache {
	n := 1
	for n*2 <= min(maxKeys, maxDenyShards) {
		n *= 2
	}
	c := &denyCache{seed: maphash.MakeSeed(), now: monoNow, mask: uint64(n - 1), shards: make([]denyShard, n)}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[string]denial)
		s.max = maxKeys / n
		if i < maxKeys%n {
			s.max++
		}
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)&c.mask]
}

// get returns key's live denial, if any.
func (c *denyCache) get(key string, now time.Duration) (denial, bool) {
	s := c.shard(key)
	s.mu.Lock()
	d, ok := s.m[key]
	if ok && now >= d.until {
		delete(s.m, key)
		ok = false
	}
	s.mu.Unlock()
	return d, ok
}

// del forgets key's denial.
func (c *denyCache) del(key string) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// clear forgets every denial.
func (c *denyCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.mu.Unlock()
	}
}

// dropLayered forgets every denial of a call of more than one layer.
func (c *denyCache) dropLayered() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, d := range s.m {
			if d.shape != 0 {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
}

// put records a denial for key, replacing an older one.
func (c *denyCache) put(key string, d denial) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; !ok && len(s.m) >= s.max {
		now := c.now()
		for k, old := range s.m {
			if now >= old.until {
				delete(s.m, k)
			}
		}
		for k := range s.m {
			if len(s.m) < s.max {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[key] = d
}

// len returns the number of entries held.
func (c *denyCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
