package hotlimit

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Limiter is a keyed rate limiter: each key (an API token, a user, a
// client IP) has its own state under one policy, chosen at New.
//
// A decision for an existing key takes no lock: it probes a shard's table
// and CASes the key's 64-bit state word, and allocates nothing. Keys are
// compared exactly, never by hash alone. A Limiter is safe for concurrent
// use; it must not be copied. Call Close when done with it to stop its
// sweeper. docs/semantics.md defines every decision exactly.
//
// Create one with New; the zero Limiter is not usable.
type Limiter struct {
	kind  kind                   // the algorithm; SetPolicy keeps it
	p     atomic.Pointer[params] // the current policy (see SetPolicy)
	logs  []logShard             // kindSlidingLog: the keyed state (see slidinglog.go)
	setMu sync.Mutex             // serialises SetPolicy

	seed   uint64 // mixed into every key's hash; random per limiter
	shift  uint   // shard index = hash >> shift
	shards []shard

	clock  Clock        // nil: the default clock
	coarse *CoarseClock // non-nil: the clock is this CoarseClock
	owned  bool         // the limiter started coarse and stops it

	maxKeys int64        // 0: unbounded
	keys    atomic.Int64 // entries held plus insertions in flight; ≤ maxKeys
	sweptAt atomic.Int64 // latest instant a fresh entry removed was fresh from (params.freshFrom)

	slotsMax atomic.Int64 // at least every published table's length (eviction's sample, gc.go)
	onRoom   func()       // called when a reservation is given back unused (ConcurrencyLimiter)

	onDeny func(keyHash uint64, d Decision) // WithDenyHook; nil: none
	tally  tally                            // Stats.Allowed and Stats.Denied

	sweepEvery time.Duration
	closeOnce  sync.Once
	stop       chan struct{}
	done       chan struct{}
}

// New returns a Limiter for policy: a TokenBucket, LeakyBucket,
// FixedWindow, SlidingWindow or SlidingLog, or a pointer to one. It returns
// an error naming the field and value for a configuration that is invalid
// or that the packed state cannot represent exactly, and for a nil policy
// or nil pointer.
func New(policy Policy, opts ...Option) (*Limiter, error) {
	cfg := config{sweepEvery: time.Minute}
	for _, o := range opts {
		if o == nil {
			cfg.fail("nil Option")
			continue
		}
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.clock != nil && cfg.coarse != 0 {
		return nil, fmt.Errorf("hotlimit: WithClock and WithCoarseClock are mutually exclusive")
	}
	p, err := newParams(policy)
	if err != nil {
		return nil, err
	}
	l := &Limiter{kind: p.kind, seed: rand.Uint64(), maxKeys: int64(cfg.maxKeys), sweepEvery: cfg.sweepEvery, onDeny: cfg.onDeny, tally: newTally()}
	l.p.Store(p)
	n := 1
	for n < cfg.shardCount() {
		n <<= 1
	}
	l.shards = make([]shard, n)
	if l.kind == kindSlidingLog {
		l.logs = make([]logShard, n)
		for i := range l.logs {
			l.logs[i].m = make(map[string]*logRing)
			l.logs[i].p = p
		}
	}
	for i := range l.shards {
		l.publish(&l.shards[i], newTable(minSlots, 0, p))
	}
	l.shift = 64 // hash >> 64 is 0 in Go: one shard
	for m := n; m > 1; m >>= 1 {
		l.shift--
	}
	l.clock = cfg.clock
	if cfg.coarse != 0 {
		l.coarse = NewCoarseClock(cfg.coarse)
		l.clock, l.owned = l.coarse, true
	} else if cc, ok := cfg.clock.(*CoarseClock); ok {
		l.coarse = cc
	}
	if cfg.sweepEvery > 0 {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.sweepLoop()
	}
	return l, nil
}

// now reads the limiter's clock, clamped to [0, maxTime].
func (l *Limiter) now() int64 {
	var t int64
	switch {
	case l.coarse != nil:
		t = l.coarse.now.Load()
	case l.clock == nil:
		t = int64(systemNow())
	default:
		t = int64(l.clock.Now())
	}
	return min(max(t, 0), maxTime)
}

// hash returns key's hash, never 0. It mixes xxhash with the limiter's
// random seed through a bijective finalizer, so an attacker who knows the
// code but not the seed cannot choose keys that share a shard or a probe
// run: only keys whose 64-bit xxhash collide outright stay together, and
// those are pairs, not piles.
func (l *Limiter) hash(key string) uint64 {
	h := xxhash.Sum64String(key) ^ l.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h | 1
}

func (l *Limiter) shardOf(h uint64) *shard {
	return &l.shards[h>>l.shift]
}

// Close stops the limiter's background goroutines (the sweeper, and a
// coarse clock started by WithCoarseClock) and waits for them to exit. The
// limiter keeps deciding correctly after Close; it only stops sweeping.
// Close is idempotent and safe to call concurrently with any method.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.done
		}
		if l.owned {
			l.coarse.Stop()
		}
	})
	return nil
}
