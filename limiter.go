package hotlimit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Decision is the outcome of one request. See DESIGN.md "Semantics" for
// the exact definition of each field per algorithm.
type Decision struct {
	// Allowed reports whether the request was admitted and its cost consumed.
	Allowed bool
	// Limit is the policy's capacity: Burst, Limit, or Capacity+1 (leaky).
	Limit int64
	// Remaining is how many unit requests could be admitted right after
	// this decision (≥ 0).
	Remaining int64
	// RetryAfter, when denied, is the shortest wait after which the same
	// request is admitted if nothing else consumes meanwhile; Never if it
	// can never be. 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its fresh state.
	ResetAfter time.Duration
	// Delay, for LeakyBucket only, is how long an admitted request should
	// wait before it starts.
	Delay time.Duration
}

// verdict is a decision as the algorithms compute it: four fields, so the
// compiler passes it in registers through every layer, where the six-field
// Decision would be copied through memory at each. Limiter.decision turns
// it into a Decision once, at the API boundary.
type verdict struct {
	rem   int64 // Remaining
	retry int64 // RetryAfter, ns
	reset int64 // ResetAfter, ns
	ok    bool  // Allowed
}

// decision builds the public Decision for a verdict on cost.
func (p *params) decision(v verdict, cost int64) (d Decision) {
	d.setFrom(v, p.limit, p.delay(v, cost))
	return d
}

// setFrom fills d field by field. Building a Decision in a temporary and
// copying it costs a store-forwarding stall per copy (the copy reads 16
// bytes that were written 8 at a time), about 10 ns each here, so the
// exported methods fill their named result in place instead.
func (d *Decision) setFrom(v verdict, limit, delay int64) {
	d.Allowed, d.Limit, d.Remaining = v.ok, limit, v.rem
	d.RetryAfter, d.ResetAfter, d.Delay = time.Duration(v.retry), time.Duration(v.reset), time.Duration(delay)
}

// delay returns the Delay of a verdict on cost: for an admission by the
// leaky bucket, the debt before it (reset − cost·T); otherwise 0.
func (p *params) delay(v verdict, cost int64) int64 {
	if p.kind == kindLeakyBucket && v.ok && cost > 0 {
		return v.reset - cost*p.g.t
	}
	return 0
}

type kind uint8

const (
	kindTokenBucket kind = iota + 1
	kindLeakyBucket
	kindFixedWindow
	kindSlidingWindow
	kindSlidingLog
	kindConcurrency
)

func (k kind) String() string {
	return [...]string{"", "TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog", "Concurrency"}[k]
}

// Limiter is a keyed rate limiter: each key (an API token, a user, a
// client IP) has its own state under one policy, chosen at New.
//
// A decision for an existing key takes no lock: it probes a shard's table
// and CASes the key's 64-bit state word, and allocates nothing. Keys are compared
// exactly, never by hash alone. A Limiter is safe for concurrent use; it
// must not be copied. Call Close when done with it to stop its sweeper.
//
// Create one with New; the zero Limiter is not usable.
type Limiter struct {
	kind  kind                   // the algorithm; SetPolicy keeps it
	p     atomic.Pointer[params] // the current policy (see SetPolicy)
	logs  []logShard             // kindSlidingLog: the keyed state (see logs.go)
	setMu sync.Mutex             // serialises SetPolicy

	seed   uint64 // mixed into every key's hash; random per limiter
	shift  uint   // shard index = hash >> shift
	shards []shard

	clock  Clock        // nil: the default clock
	coarse *CoarseClock // non-nil: the clock is this CoarseClock
	owned  bool         // the limiter started coarse and stops it

	maxKeys int64        // 0: unbounded
	keys    atomic.Int64 // entries held plus insertions in flight; ≤ maxKeys
	sweptAt atomic.Int64 // latest instant at which a fresh entry was removed

	onDeny func(keyHash uint64, d Decision) // WithDenyHook; nil: none
	tally  tally                            // Stats.Allowed and Stats.Denied

	sweepEvery time.Duration
	closeOnce  sync.Once
	stop       chan struct{}
	done       chan struct{}
}

// Option configures a Limiter.
type Option func(*config)

type config struct {
	onDeny     func(keyHash uint64, d Decision)
	clock      Clock
	coarse     time.Duration
	shards     int
	maxKeys    int
	sweepEvery time.Duration
	err        error
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("hotlimit: "+format, args...)
	}
}

const maxShards = 1 << 16

// WithClock makes the limiter read time from c instead of the default
// clock. Use a ManualClock in tests.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c == nil {
			cfg.fail("WithClock: nil Clock")
		}
		cfg.clock = c
	}
}

// WithCoarseClock makes the limiter read a cached clock refreshed every
// resolution by a goroutine that Close stops. See CoarseClock for what
// this trades: decisions save a clock read; denials are re-checked on the
// precise clock; but on real time an admission can be booked up to the
// cache's lag early, which lets a bucket admit up to lag/T extra units
// over an interval.
func WithCoarseClock(resolution time.Duration) Option {
	return func(cfg *config) {
		if resolution <= 0 || resolution > time.Second {
			cfg.fail("WithCoarseClock: resolution must be in (0, 1s], got %v", resolution)
		}
		cfg.coarse = resolution
	}
}

// WithDenyHook calls hook, synchronously, for every request that AllowN
// (or Allow, AllowBytes, AllowLayers' layers) denies, with the denial and
// the key's hash instead of the key: the limiter's seeded 64-bit hash,
// stable for the limiter's life and meaningless outside it, so a log or a
// metric can group denials by client without holding tokens or addresses.
// The allow path does not look at the hook. The hook must be fast and must
// not block; it may call the limiter. Wait on a window policy tries again
// through AllowN, so each denied try calls it; the admissions AllowLayers
// gives back do not.
func WithDenyHook(hook func(keyHash uint64, d Decision)) Option {
	return func(cfg *config) {
		if hook == nil {
			cfg.fail("WithDenyHook: nil hook")
		}
		cfg.onDeny = hook
	}
}

// WithShards sets the number of lock stripes, rounded up to a power of
// two. The default is 256. n must be in [1, 65536].
func WithShards(n int) Option {
	return func(cfg *config) {
		if n < 1 || n > maxShards {
			cfg.fail("WithShards: n must be in [1, %d], got %d", maxShards, n)
		}
		cfg.shards = n
	}
}

// WithMaxKeys bounds the number of keys held: Len() ≤ n at all times. To
// make room for a new key the limiter looks at several entries and removes
// the one closest to fresh, so a flood of new keys cannot reset a drained
// key while fresher ones exist. 0 means unbounded.
func WithMaxKeys(n int) Option {
	return func(cfg *config) {
		if n < 0 {
			cfg.fail("WithMaxKeys: n must be ≥ 0, got %d", n)
		}
		cfg.maxKeys = n
	}
}

// WithSweepInterval sets how often the background sweeper removes keys
// whose state is fresh (which changes no decision). The default is one
// minute; 0 disables the sweeper (call Sweep yourself, or rely on
// WithMaxKeys).
func WithSweepInterval(d time.Duration) Option {
	return func(cfg *config) {
		if d < 0 {
			cfg.fail("WithSweepInterval: interval must be ≥ 0, got %v", d)
		}
		cfg.sweepEvery = d
	}
}

// New returns a Limiter for policy: a TokenBucket, LeakyBucket,
// FixedWindow, SlidingWindow or SlidingLog, or a pointer to one. It returns
// an error naming the field and value for a configuration that is invalid
// or that the packed state cannot represent exactly, and for a nil policy
// or nil pointer.
func New(policy Policy, opts ...Option) (*Limiter, error) {
	cfg := config{shards: 256, sweepEvery: time.Minute}
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
	for n < cfg.shards {
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
		l.shards[i].tab.Store(newTable(minSlots, 0, p))
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

// params is a policy as the engine uses it. It is immutable once made;
// SetPolicy publishes a new one.
type params struct {
	policy Policy // as given to New or SetPolicy, pointers dereferenced
	kind   kind
	limit  int64
	g      gcra   // kindTokenBucket, kindLeakyBucket
	win    window // kindFixedWindow, kindSlidingWindow
	logW   int64  // kindSlidingLog: the window, ns
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

// step decides cost c at now against state word w. See bucket.go and
// window.go.
func (p *params) step(w uint64, now, c int64) (uint64, verdict) {
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		return p.g.step(w, now, c)
	case kindConcurrency: // peeks only: see concurrency.go
		return w, verdict{ok: true, rem: max(0, p.limit-int64(w))}
	}
	return p.win.step(w, now, c)
}

// resetAfter returns how long until w is a fresh key's state at now.
//
// For a concurrency limiter, which has no notion of time, it is the number
// of operations in flight: 0 exactly when the entry is fresh.
func (p *params) resetAfter(w uint64, now int64) int64 {
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		return p.g.resetAfter(w, now)
	case kindConcurrency:
		return int64(w)
	}
	return p.win.resetAfter(w, now)
}

// decide runs the CAS loop on one key's state word. It reports false,
// having written nothing, if the word is retired (deadBit): the caller
// must find the key's live slot under the shard's mutex. A denial and a
// peek never write.
func (l *Limiter) decide(p *params, w *atomic.Uint64, now, cost int64) (verdict, int64, bool) {
	rechecked := false
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return verdict{}, now, false
		}
		var next uint64
		var d verdict
		if p.kind <= kindLeakyBucket {
			next, d = p.g.step(old, now, cost)
		} else {
			next, d, now = p.win.stepAt(old, now, cost) // now: where a stale reading is decided
		}
		if next == old || w.CompareAndSwap(old, next) {
			if !d.ok && l.coarse != nil && !rechecked {
				// A lagging coarse reading errs towards denying while it
				// lags: decide a denial again on the precise clock.
				rechecked = true
				if p := min(int64(l.coarse.Precise()), maxTime); p > now {
					now = p
					continue
				}
			}
			return d, now, true
		}
		// Another request updated the word first: decide again from it.
	}
}

// Allow is shorthand for AllowN(key, 1).
func (l *Limiter) Allow(key string) Decision { return l.AllowN(key, 1) }

// AllowN decides whether a request of the given cost for key may proceed
// now, and consumes the cost if so. Cost 0 peeks: it is always allowed and
// reports the key's current state without changing it. A cost below 0 or
// above the policy's Limit, or a key longer than MaxKeyLen, is denied with
// RetryAfter = Never. A denial never changes any state, and a peek or a
// denial for an unknown key creates no entry.
func (l *Limiter) AllowN(key string, cost int64) (d Decision) {
	v, _, p := l.allow(key, cost)
	d.setFrom(v, p.limit, p.delay(v, cost))
	return d
}

// allow is AllowN before its Decision is built. It also returns the
// instant the decision was made at (Refund needs it for the windows) and
// the policy it was made under.
func (l *Limiter) allow(key string, cost int64) (verdict, int64, *params) {
	now := l.now()
	if len(key) > MaxKeyLen {
		return l.never(key, now, cost)
	}
	if l.logs != nil {
		return l.allowLog(key, now, cost)
	}
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	p := t.p // the table's words are in its policy's format
	if cost < 0 || cost > p.limit {
		return l.never(key, now, cost)
	}
	if sl := t.find(h, key); sl != nil {
		if v, at, ok := l.decide(p, &sl.word, now, cost); ok {
			l.tally.count(v.ok)
			if !v.ok && l.onDeny != nil {
				l.onDeny(h, p.decision(v, cost))
			}
			return v, at, p
		}
	}
	v, at, p := l.allowLocked(s, h, key, now, cost)
	if !v.ok && l.onDeny != nil {
		l.onDeny(h, p.decision(v, cost))
	}
	return v, at, p
}

// allowLocked is AllowN's path for a key whose live slot the lock-free
// probe did not find (new, being inserted, or moved by a rebuild).
func (l *Limiter) allowLocked(s *shard, h uint64, key string, now, cost int64) (verdict, int64, *params) {
	sl, now := l.slotLocked(s, h, key, now, cost > 0)
	p := s.tab.Load().p // sl's table: nothing rebuilds it while we hold s.mu
	var v verdict
	switch {
	case cost > p.limit: // SetPolicy lowered the limit meanwhile: can never pass
		var w uint64
		if sl != nil {
			w = sl.word.Load()
		}
		_, v = p.step(w, now, 0)
		v.ok, v.retry = false, int64(Never)
	case sl == nil:
		_, v = p.step(0, now, 0) // a peek at an unknown key: fresh, no entry
	default:
		v, now, _ = l.decide(p, &sl.word, now, cost) // nothing retires while we hold s.mu
	}
	s.mu.Unlock()
	l.tally.count(v.ok)
	return v, now, p
}

// slotLocked locks s.mu and returns key's live slot, with s.mu held (the
// caller unlocks). An absent key is inserted when create is true, after
// reserving room under WithMaxKeys, and the instant to decide at is raised
// to sweptAt for the new entry (see gc.go); otherwise it returns nil.
func (l *Limiter) slotLocked(s *shard, h uint64, key string, now int64, create bool) (*slot, int64) {
	s.mu.Lock()
	if sl := s.tab.Load().find(h, key); sl != nil || !create {
		return sl, now
	}
	if !l.tryReserveKey() {
		// Evicting takes other shards' mutexes: never while holding one.
		s.mu.Unlock()
		ok := l.reserveKey(now)
		s.mu.Lock()
		if sl := s.tab.Load().find(h, key); sl != nil || !ok {
			if ok {
				l.keys.Add(-1) // inserted meanwhile by someone else
			}
			return sl, now
		}
	}
	now = max(now, l.sweptAt.Load())
	t := s.tab.Load()
	if nt := t.grown(key); nt != t {
		s.tab.Store(nt)
		t = nt
	}
	return t.insert(h, key), now
}

// never returns the denial of a request that can never be admitted, with
// the key's current Remaining and ResetAfter, and calls the deny hook.
func (l *Limiter) never(key string, now, cost int64) (verdict, int64, *params) {
	var v verdict
	p := l.p.Load()
	if len(key) <= MaxKeyLen {
		v, p = l.peek(key, now)
	}
	v.ok, v.retry = false, int64(Never)
	l.tally.count(false)
	if l.onDeny != nil {
		l.onDeny(l.hash(key), p.decision(v, cost))
	}
	return v, now, p
}

// peek returns the verdict for cost 0 without counting it, and the policy
// it was made under.
func (l *Limiter) peek(key string, now int64) (verdict, *params) {
	if l.logs != nil {
		v, _, p := l.peekLog(key, now, 0)
		return v, p
	}
	w, p := l.word(key, now)
	_, v := p.step(w, now, 0)
	return v, p
}

// word returns key's live state word (0, a fresh state, for an unknown
// key) and the policy its format follows, taking the shard's mutex only if
// the lock-free probe misses.
func (l *Limiter) word(key string, now int64) (uint64, *params) {
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if w := sl.word.Load(); w&deadBit == 0 {
			return w, t.p
		}
	}
	var w uint64
	if sl, _ := l.slotLocked(s, h, key, now, false); sl != nil {
		w = sl.word.Load()
	}
	p := s.tab.Load().p
	s.mu.Unlock()
	return w, p
}

// tryReserveKey reserves room for one more key if the limiter is below
// WithMaxKeys. The caller must release it (keys.Add(-1)) if it does not
// insert.
func (l *Limiter) tryReserveKey() bool {
	if l.maxKeys == 0 {
		l.keys.Add(1)
		return true
	}
	for {
		n := l.keys.Load()
		if n >= l.maxKeys {
			return false
		}
		if l.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reserveKey reserves room for one more key, evicting as needed. Requires
// that no shard mutex is held. A concurrency limiter evicts only fresh
// entries (no operation in flight) and gives up, reporting false, when its
// sample holds none.
func (l *Limiter) reserveKey(now int64) bool {
	for !l.tryReserveKey() {
		found := l.evictOne(now)
		if l.kind == kindConcurrency {
			return found && l.tryReserveKey()
		}
		if !found {
			runtime.Gosched() // every held slot is an insertion in flight
		}
	}
	return true
}

// Wait blocks until a request of the given cost for key is admitted, or
// returns an error without consuming anything.
//
// For the token and leaky buckets, Wait reserves the request's slot at
// once (consuming it) and sleeps until the slot: the instant the request
// fits for the token bucket, the start of its turn for the leaky bucket.
// If the context's deadline is before the slot, Wait fails at once with
// ErrDeadline; if the context ends while it sleeps, it gives the slot back
// and returns the context's error. For the window policies, which cannot
// hold a reservation in a future window, Wait sleeps until RetryAfter and
// tries again, so it is not first-come first-served under contention.
//
// Wait sleeps in real time, whatever the limiter's clock. It returns
// ErrInvalidCost for a cost below 0 or above Limit, and ErrKeyTooLong.
func (l *Limiter) Wait(ctx context.Context, key string, cost int64) error {
	if limit := l.p.Load().limit; cost < 0 || cost > limit {
		return fmt.Errorf("%w: cost %d, limit %d", ErrInvalidCost, cost, limit)
	}
	if len(key) > MaxKeyLen {
		return ErrKeyTooLong
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if cost == 0 {
		return nil
	}
	maxWait := int64(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = int64(time.Until(dl))
	}
	if l.kind > kindLeakyBucket {
		return l.waitWindow(ctx, key, cost)
	}
	wait, ok := l.reserve(key, cost, maxWait)
	if !ok {
		return fmt.Errorf("%w: would wait %v", ErrDeadline, time.Duration(wait))
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(wait))
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		l.refund(key, cost, l.now()) // the slot back; Stats count it as denied
		return ctx.Err()
	}
}

func (l *Limiter) waitWindow(ctx context.Context, key string, cost int64) error {
	for {
		d := l.AllowN(key, cost)
		if d.Allowed {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.RetryAfter {
			return fmt.Errorf("%w: would wait %v", ErrDeadline, d.RetryAfter)
		}
		t := time.NewTimer(d.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// reserve takes a slot for Wait; see gcra.reserve.
func (l *Limiter) reserve(key string, cost, maxWait int64) (wait int64, ok bool) {
	now := l.now()
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if wait, ok, live := reserveAt(t.p, &sl.word, now, cost, maxWait); live {
			l.tally.count(ok)
			return wait, ok
		}
	}
	sl, now := l.slotLocked(s, h, key, now, true)
	wait, ok, _ = reserveAt(s.tab.Load().p, &sl.word, now, cost, maxWait)
	if !ok {
		l.retireFreshLocked(s, sl, now) // nothing was written: leave no entry
	}
	s.mu.Unlock()
	l.tally.count(ok)
	return wait, ok
}

// reserveAt runs reserve's CAS loop; live is false if the word is retired.
// A cost above the policy's limit (lowered by SetPolicy) never fits.
func reserveAt(p *params, w *atomic.Uint64, now, cost, maxWait int64) (wait int64, ok, live bool) {
	if cost > p.limit {
		return int64(Never), false, true
	}
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return 0, false, false
		}
		next, wait, ok := p.g.reserve(old, now, cost, maxWait)
		if !ok {
			return wait, false, true
		}
		if next == old || w.CompareAndSwap(old, next) {
			return wait, true, true
		}
	}
}

// Len returns the number of keys currently held (counting insertions in
// flight).
func (l *Limiter) Len() int { return int(l.keys.Load()) }

// Stats are a limiter's counters since New.
type Stats struct {
	Allowed uint64 // admitted requests (including peeks)
	Denied  uint64 // denied requests
	Keys    uint64 // keys currently held: Len()
	Swept   uint64 // fresh entries removed (by the sweeper or to make room)
	Evicted uint64 // non-fresh entries evicted to make room (WithMaxKeys)
}

// Stats returns the limiter's counters. Each is read atomically; together
// they are not a snapshot of one instant.
func (l *Limiter) Stats() Stats {
	var st Stats
	for i := range l.shards {
		s := &l.shards[i]
		st.Swept += s.swept.Load()
		st.Evicted += s.evicted.Load()
	}
	st.Allowed, st.Denied = l.tally.sums()
	st.Keys = uint64(max(0, l.keys.Load()))
	return st
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
