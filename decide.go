package hotlimit

import (
	"math"
	"sync/atomic"
	"time"
)

// Never is the RetryAfter of a request that can never be admitted: its cost
// is negative or larger than the policy's capacity.
const Never time.Duration = math.MaxInt64

// Decision is the outcome of one request. docs/semantics.md defines each
// field exactly, per algorithm.
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
// Decision would be copied through memory at each. Decision.setFrom turns
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
		if p.kind.isBucket() {
			next, d = p.g.step(old, now, cost)
		} else {
			next, d, now = p.win.stepAt(old, now, cost) // now: where a stale reading is decided
		}
		if next == old || w.CompareAndSwap(old, next) {
			if !d.ok && l.coarse != nil && !rechecked {
				// A lagging coarse reading errs towards denying while it
				// lags: decide a denial again on the precise clock.
				rechecked = true
				if precise := min(int64(l.coarse.Precise()), maxTime); precise > now {
					now = precise
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
	v, _, p := l.allow(key, cost, nil, l.now())
	d.setFrom(v, p.limit, p.delay(v, cost))
	return d
}

// allow is AllowN before its Decision is built, at now, a reading of l's
// clock (l.now). It also returns the instant the decision was made at and
// the policy it was made under and, when a is not nil and the request is
// admitted, sets *a to what a give-back of it needs (refund.go).
func (l *Limiter) allow(key string, cost int64, a *admission, now int64) (verdict, int64, *params) {
	if len(key) > MaxKeyLen {
		return l.never(key, now, cost, a)
	}
	if l.isSlidingLog() {
		return l.allowLog(key, now, cost, a)
	}
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	p := t.p // the table's words are in its policy's format
	if cost < 0 || cost > p.limit {
		return l.never(key, now, cost, a)
	}
	if sl := t.find(h, key); sl != nil {
		if v, at, ok := l.decide(p, &sl.word, now, cost); ok {
			l.tally.count(v.ok)
			if a != nil && v.ok {
				*a = p.admitted(s.incarnation(sl), at, at+v.reset, cost)
			}
			if !v.ok && l.onDeny != nil {
				l.onDeny(h, p.decision(v, cost))
			}
			return v, at, p
		}
	}
	v, at, p := l.allowSlow(s, h, key, now, cost, a)
	if !v.ok && l.onDeny != nil {
		l.onDeny(h, p.decision(v, cost))
	}
	return v, at, p
}

// allowSlow is AllowN's path for a key whose live slot the lock-free
// probe did not find (new, being inserted, or moved by a rebuild): it
// finds or inserts the slot under the shard's mutex, which it takes and
// releases itself. It sets *a as allow does.
func (l *Limiter) allowSlow(s *shard, h uint64, key string, now, cost int64, a *admission) (verdict, int64, *params) {
	var v verdict
	sl, now, decided := l.lockSlotFirst(s, h, key, now, cost, firstAllow(cost, &v))
	p := s.tab.Load().p // sl's table: nothing rebuilds it while we hold s.mu
	switch {
	case decided: // v is the decision the new entry was published with (or, refused, not inserted)
	case cost > p.limit: // SetPolicy lowered the limit meanwhile: can never pass
		var w uint64
		if sl != nil {
			w = sl.word.Load()
		} else {
			w, now = l.vacant(p, now) // what a peek reports for a key with no entry
		}
		_, v = p.step(w, now, 0)
		v.ok, v.retry = false, int64(Never)
	case sl == nil:
		var w uint64
		w, now = l.vacant(p, now)
		_, v = p.step(w, now, 0) // a peek at an unknown key: no entry
	default:
		v, now, _ = l.decide(p, &sl.word, now, cost) // nothing retires while we hold s.mu
	}
	if a != nil && v.ok && sl != nil {
		*a = p.admitted(s.incarnation(sl), now, now+v.reset, cost)
	}
	s.mu.Unlock()
	l.tally.count(v.ok)
	return v, now, p
}

// firstAllow returns the first decision lockSlotFirst publishes a new
// entry with: an admission of cost on the fresh word, its verdict in *v.
func firstAllow(cost int64, v *verdict) func(*params, uint64, int64) (uint64, bool) {
	return func(p *params, w uint64, now int64) (uint64, bool) {
		next, d := p.step(w, now, cost)
		*v = d
		return next, d.ok
	}
}

// never returns the denial of a request that can never be admitted, with
// the key's current Remaining and ResetAfter, and calls the deny hook.
//
// The denial and the state it reports are read under one policy. allow
// calls it when cost is above the Limit of the table it read; if SetPolicy
// has raised the Limit to cost or more before the peek here reads the
// key's table, the request is decided under that policy instead (denying
// it with Never while reporting a Limit it fits in would be a decision
// under neither policy).
func (l *Limiter) never(key string, now, cost int64, a *admission) (verdict, int64, *params) {
	var v verdict
	p := l.p.Load()
	if len(key) <= MaxKeyLen {
		v, p = l.peek(key, now)
		if 0 <= cost && cost <= p.limit && !l.isSlidingLog() {
			h := l.hash(key)
			v, at, p := l.allowSlow(l.shardOf(h), h, key, now, cost, a)
			if !v.ok && l.onDeny != nil {
				l.onDeny(h, p.decision(v, cost))
			}
			return v, at, p
		}
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
	if l.isSlidingLog() {
		v, _, p := l.peekLog(key, now, 0)
		return v, p
	}
	w, p, at := l.word(key, now)
	_, v := p.step(w, at, 0)
	return v, p
}

// word returns key's live state word (for an unknown key, the word it
// would be inserted with, and the instant it would be decided at:
// Limiter.vacant; now otherwise) and the policy its format follows, taking the shard's mutex only if
// the lock-free probe misses.
func (l *Limiter) word(key string, now int64) (w uint64, p *params, at int64) {
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if w := sl.word.Load(); w&deadBit == 0 {
			return w, t.p, now
		}
	}
	sl, _ := l.lockSlot(s, h, key, now, 0)
	p, at = s.tab.Load().p, now
	if sl != nil {
		w = sl.word.Load()
	} else {
		w, at = l.vacant(p, now)
	}
	s.mu.Unlock()
	return w, p, at
}
