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
// This is sound because a denial's RetryAfter is a lower bound: other
// requests can only consume more and push it later (redislimit never gives
// quota back), and a request of a larger cost needs at least as long. A
// lost Redis state (a flush, a failover) can only make the cache deny
// longer than Redis would, never admit more.
//
// Memory is bounded: at most max entries in all. A full shard first drops
// its expired entries, then an arbitrary one.
//
// Instants come from the process's monotonic clock; only differences
// between two readings of it are used, so its origin (and any skew against
// other processes or the Redis server) does not matter.
type denyCache struct {
	seed   maphash.Seed
	now    func() time.Duration // replaced by tests
	shards [denyShards]denyShard
}

const denyShards = 16

// denyShard is one lock stripe of a denyCache.
type denyShard struct {
	mu  sync.Mutex
	m   map[string]denial // guarded by mu
	max int               // entries this stripe may hold; the stripes' sum is the cache's bound
	_   [64]byte          // keep neighbouring stripes' locks off one cache line
}

// denial is a cached denial: requests of at least cost are denied until
// until, reporting rem and the reset instant.
type denial struct {
	until, resetAt time.Duration
	cost, rem      int64
}

func newDenyCache(maxKeys int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), now: monoNow}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[string]denial)
		s.max = maxKeys / denyShards
		if i < maxKeys%denyShards {
			s.max++
		}
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)%denyShards]
}

// get returns the live denial that covers a request of cost for key.
func (c *denyCache) get(key string, cost int64, now time.Duration) (denial, bool) {
	s := c.shard(key)
	s.mu.Lock()
	d, ok := s.m[key]
	if ok && now >= d.until {
		delete(s.m, key)
		ok = false
	}
	s.mu.Unlock()
	return d, ok && cost >= d.cost
}

// put records a denial for key, replacing an older one.
func (c *denyCache) put(key string, d denial) {
	s := c.shard(key)
	if s.max == 0 {
		return // with fewer keys than stripes, some stripes hold none
	}
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
