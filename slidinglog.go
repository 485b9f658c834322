package hotlimit

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// The sliding log (SlidingLog).
//
// A key's state is the instants of its admitted units that are still inside
// the window, oldest first, in a ring of Limit instants: that does not fit
// one word, so the sliding log does not use the lock-free table. Each shard
// has a mutex and a map from key to ring, and every operation on a key
// (decide, refund, sweep, evict) holds its shard's mutex, which makes all of
// them trivially atomic. The sliding log is for small limits, where a
// mutex per decision is a fair price for exactness; the statistics, the
// key count, WithMaxKeys and sweptAt are shared with the other policies.
//
// Semantics, at instant t, for a ring holding instants s₁ ≤ … ≤ sₙ:
//   - sᵢ counts while t − sᵢ < Window, so that any interval [a, a+Window)
//     holds at most Limit admitted units;
//   - cost c is admitted iff n + c ≤ Limit, and appends c copies of t;
//   - denied, RetryAfter is the instant the (n + c − Limit)-th oldest
//     instant stops counting: s + Window − t;
//   - Remaining is Limit − n after the decision, ResetAfter is
//     sₙ + Window − t (0 for an empty ring);
//   - a reading older than sₙ is decided at sₙ ("no time has passed"),
//     and a new entry is decided no earlier than sweptAt (see gc.go), the
//     latest instant a ring removed as fresh was fresh from.

// logShard is one stripe of the sliding log's keyed state.
type logShard struct {
	mu sync.Mutex
	p  *params // the policy, guarded by mu (SetPolicy changes it)
	m  map[string]*logRing
	// ringBytes is the bytes of m's rings and keys (see ringBytes), and
	// peak the most keys m has held, for MemStats. Written under mu.
	ringBytes atomic.Int64
	peak      atomic.Int64
	inserted  uint64 // rings ever inserted: the last incarnation (guarded by mu)
	_         [cacheLineSize - 48]byte
}

// logRing holds a key's admitted instants.
//
// Invariants: 0 ≤ n ≤ len(t); the instants are t[(head+i) % len(t)] for
// i < n, in non-decreasing order, all ≤ last; last only grows. Instants
// that no longer count are dropped only when the ring is written, at an
// instant ≤ last, so a later stale reading (decided at last) never sees
// fewer instants than it should.
type logRing struct {
	t    []int64
	head int
	n    int
	last int64  // the latest instant the ring was written at
	inc  uint64 // incarnation: its stripe's insertion count when inserted
}

func (r *logRing) at(i int) int64 {
	j := r.head + i
	if j >= len(r.t) {
		j -= len(r.t)
	}
	return r.t[j]
}

// live returns the index of the oldest instant that still counts at now.
func (r *logRing) live(now, w int64) int {
	lo, hi := 0, r.n // the instants are sorted: binary search
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid)+w <= now {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// expire drops the k oldest instants.
func (r *logRing) expire(k int) {
	r.head += k
	if r.head >= len(r.t) {
		r.head -= len(r.t)
	}
	r.n -= k
}

// grow makes room for n instants, keeping the ring's contents.
func (r *logRing) grow(n int) {
	t := make([]int64, n)
	for i := range r.n {
		t[i] = r.at(i)
	}
	r.t, r.head = t, 0
}

// push appends c copies of now; the caller has checked that they fit.
func (r *logRing) push(now int64, c int64) {
	for ; c > 0; c-- {
		j := r.head + r.n
		if j >= len(r.t) {
			j -= len(r.t)
		}
		r.t[j] = now
		r.n++
	}
	r.last = now
}

// drop removes up to c of the newest instants that are ≤ at, keeping the
// newer ones.
func (r *logRing) drop(c, at int64) {
	keep := 0 // newer than at
	for keep < r.n && r.at(r.n-1-keep) > at {
		keep++
	}
	gone := int(min(c, int64(r.n-keep)))
	if gone == 0 {
		return
	}
	for i := r.n - keep; i < r.n; i++ { // move the kept ones down
		j := (r.head + i - gone) % len(r.t)
		r.t[j] = r.at(i)
	}
	r.n -= gone
}

// logVerdict decides cost at now on ring r (nil: a fresh key), whose
// instants before index first no longer count, without changing it.
func (p *params) logVerdict(r *logRing, first int, now, cost int64) verdict {
	n := int64(0)
	if r != nil {
		n = int64(r.n - first)
	}
	if cost == 0 { // a peek always passes, also over a limit SetPolicy lowered
		v := verdict{ok: true, rem: max(0, p.limit-n)}
		if n > 0 {
			v.reset = r.at(r.n-1) + p.logW - now
		}
		return v
	}
	if n+cost <= p.limit {
		v := verdict{ok: true, rem: p.limit - n - cost}
		switch {
		case cost > 0:
			v.reset = p.logW
		case n > 0:
			v.reset = r.at(r.n-1) + p.logW - now
		}
		return v
	}
	return verdict{
		rem:   max(0, p.limit-n), // n > limit after SetPolicy lowered it
		retry: r.at(first+int(n+cost-p.limit)-1) + p.logW - now,
		reset: r.at(r.n-1) + p.logW - now,
	}
}

// isSlidingLog reports whether l is a sliding log, whose keyed state is
// in l.logs rather than in the shards' tables.
func (l *Limiter) isSlidingLog() bool { return l.logs != nil }

// logShardOf returns key's stripe and the shard holding its counters.
func (l *Limiter) logShardOf(key string) (*logShard, *shard) {
	i := l.hash(key) >> l.shift
	return &l.logs[i], &l.shards[i]
}

// logRingLocked returns key's ring (nil if none), the instant to decide at
// and the index of the ring's oldest instant that counts then. Requires
// ls.mu; changes nothing.
func (l *Limiter) logRingLocked(ls *logShard, key string, now int64) (*logRing, int64, int) {
	r := ls.m[key]
	if r == nil {
		return nil, max(now, l.sweptAt.Load()), 0
	}
	now = max(now, r.last)
	return r, now, r.live(now, ls.p.logW)
}

// allowLog is allow for the sliding log.
func (l *Limiter) allowLog(key string, now, cost int64, a *admission) (verdict, int64, *params) {
	ls, _ := l.logShardOf(key)
	ls.mu.Lock()
	var v verdict
	var at int64
	var p *params
	for {
		var r *logRing
		var first int
		r, at, first = l.logRingLocked(ls, key, now)
		p = ls.p
		if cost < 0 || cost > p.limit {
			v = p.logVerdict(r, first, at, 0)
			v.ok, v.retry = false, int64(Never)
			break
		}
		if v = p.logVerdict(r, first, at, cost); !v.ok || cost == 0 {
			break
		}
		if r == nil {
			if r = l.newLogOrMakeRoom(ls, key, now); r == nil {
				continue // the mutex was released: decide again
			}
		}
		r.expire(first)
		if len(r.t) < int(p.limit) {
			ls.ringBytes.Add(int64(allocSize(8*int(p.limit))) - int64(allocSize(8*len(r.t))))
			r.grow(int(p.limit)) // SetPolicy raised the limit
		}
		r.push(at, cost)
		if a != nil {
			*a = admission{inc: r.inc, from: at}
		}
		break
	}
	ls.mu.Unlock()
	l.tally.count(v.ok)
	if !v.ok && l.onDeny != nil {
		l.onDeny(l.hash(key), p.decision(v, cost))
	}
	return v, at, p
}

// newLogOrMakeRoom inserts an empty ring for key, after reserving room under
// WithMaxKeys. It requires ls.mu and returns holding it, but when the
// limiter is full it releases ls.mu to make room, inserts nothing and
// returns nil: what the caller read under the mutex is stale, and it must
// decide again.
func (l *Limiter) newLogOrMakeRoom(ls *logShard, key string, now int64) *logRing {
	if !l.tryReserveKey() {
		ls.mu.Unlock()
		if l.reserveKey(now, 0, key) { // false: key's ring was created meanwhile
			l.keys.Add(-1) // the room was made; whoever decides again takes it
		}
		ls.mu.Lock()
		return nil
	}
	ls.inserted++
	r := &logRing{t: make([]int64, ls.p.limit), inc: ls.inserted}
	ls.m[string([]byte(key))] = r // copy: the key may be a view of a []byte
	ls.ringBytes.Add(ringBytes(len(key), len(r.t)))
	if n := int64(len(ls.m)); n > ls.peak.Load() {
		ls.peak.Store(n)
	}
	return r
}

// peekLog returns the verdicts for cost 0 and for cost at now, from one
// reading of key's ring, without changing anything; for a cost outside
// [0, Limit] the second is the zero verdict.
func (l *Limiter) peekLog(key string, now, cost int64) (cur, v verdict, p *params) {
	ls, _ := l.logShardOf(key)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	r, at, first := l.logRingLocked(ls, key, now)
	p = ls.p
	cur = p.logVerdict(r, first, at, 0)
	if cost >= 0 && cost <= p.limit {
		v = p.logVerdict(r, first, at, cost)
	}
	return cur, v, p
}

// refundLog gives back cost of admission a on key: it removes up to cost
// of key's newest instants that are ≤ a.from and still count, if key's ring
// is the one a was admitted into, and the ring if it is then empty.
func (l *Limiter) refundLog(key string, cost int64, a admission) {
	ls, s := l.logShardOf(key)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	r, now, first := l.logRingLocked(ls, key, l.now())
	if r == nil || r.inc != a.inc {
		return // another ring than the admission's
	}
	r.expire(first)
	r.last = now
	r.drop(cost, a.from)
	l.tally.countRefund()
	if r.n == 0 {
		l.removeLogLocked(ls, s, key, now, true)
	}
}

// removeLogLocked deletes key's ring, as of instant now. Requires ls.mu.
// A fresh ring raises sweptAt to the instant it was fresh from: its
// newest instant's expiry, or its latest write when that is later (a
// reading older than it is decided there).
func (l *Limiter) removeLogLocked(ls *logShard, s *shard, key string, now int64, fresh bool) {
	if fresh {
		from := now
		if r := ls.m[key]; r != nil {
			from = r.last
			if r.n > 0 {
				from = max(from, r.at(r.n-1)+ls.p.logW)
			}
			from = min(from, now)
		}
		l.raiseSweptAt(from) // before the entry goes: see gc.go
		s.swept.Add(1)
	} else {
		s.evicted.Add(1)
	}
	if r := ls.m[key]; r != nil {
		ls.ringBytes.Add(-ringBytes(len(key), len(r.t)))
	}
	delete(ls.m, key)
	l.keys.Add(-1)
}

// sweepLogShard removes every fresh ring of stripe i.
func (l *Limiter) sweepLogShard(i int) int {
	removed := 0
	ls, s := &l.logs[i], &l.shards[i]
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := l.now()
	for k, r := range ls.m {
		if at := max(now, r.last); r.live(at, ls.p.logW) == r.n {
			l.removeLogLocked(ls, s, k, at, true)
			removed++
		}
	}
	return removed
}

// evictLog removes the ring closest to fresh among a sample of evictMin
// distinct rings (fewer only if the limiter holds fewer), like evictOne:
// each from a stripe drawn uniformly at random, at a uniformly random
// place in the stripe's map when it holds at most 64 rings, else the first
// of a map iteration (which Go randomises; this is not uniform). It
// removes the ring only if its score is still the one sampled. Requires
// that no stripe mutex is held. Like evictFrom, it removes nothing and
// reports mine when the sample holds the ring of key, the key being
// inserted, created meanwhile by another request.
func (l *Limiter) evictLog(now int64, key string) (found, mine bool) {
	type cand struct {
		i     int
		key   string
		r     *logRing
		score score
	}
	full := l.keys.Load()
	if full < l.maxKeys {
		return true, false // room was freed meanwhile: the caller reserves it
	}
	want := min(evictMin, int(full))
	var c [evictMin]cand
	n := 0
	nsh := len(l.logs)
	scoreOf := func(ls *logShard, r *logRing) score {
		at := max(now, r.last)
		return ls.p.scoreOf(ls.p.logVerdict(r, r.live(at, ls.p.logW), at, 0))
	}
	for tries := 0; n < want && tries < maxTries; tries++ {
		i := rand.IntN(nsh)
		ls := &l.logs[i]
		ls.mu.Lock()
		skip := 0
		if len(ls.m) <= 64 && len(ls.m) > 0 {
			skip = rand.IntN(len(ls.m))
		}
	rings:
		for key, r := range ls.m {
			if skip > 0 {
				skip--
				continue
			}
			for j := range c[:n] {
				if c[j].r == r {
					break rings // drawn before
				}
			}
			c[n] = cand{i, key, r, scoreOf(ls, r)}
			n++
			break
		}
		ls.mu.Unlock()
	}
	for _, x := range c[:n] {
		if x.key == key {
			return true, true
		}
	}
	if n < want {
		return false, false // a short sample: see gc.go, "A short sample"
	}
	b := c[closest(c[:n], func(x *cand) score { return x.score }, rand.IntN)]
	ls, s := &l.logs[b.i], &l.shards[b.i]
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m[b.key] != b.r || scoreOf(ls, b.r) != b.score {
		return true, false // gone or changed since sampling; the caller tries again
	}
	at := max(now, b.r.last)
	l.removeLogLocked(ls, s, b.key, at, b.r.live(at, ls.p.logW) == b.r.n)
	return true, false
}
