package hotlimit

import "sync/atomic"

// Refund gives back cost that an admission for key consumed, as if it had
// not happened: the token and leaky buckets move the key's TAT back by
// cost·T (never making a bucket fuller than full); the windows lower the
// count of the current window (or, for the sliding window, of the previous
// one when the window has just turned); the sliding log removes the newest
// admitted instants that still count. It never gives back more than the
// state holds, and does nothing for a key the limiter no longer holds. Use
// it when work that was admitted did not happen (the request failed
// validation, a later check refused it); AllowLayers uses it internally.
func (l *Limiter) Refund(key string, cost int64) {
	if cost <= 0 || cost > l.Limit() || len(key) > MaxKeyLen {
		return
	}
	if l.isSlidingLog() {
		l.refundLog(key, cost, maxTime) // the newest instants
		return
	}
	l.refund(key, cost, l.now())
}

// refund gives back cost admitted at instant at.
func (l *Limiter) refund(key string, cost, at int64) {
	if cost <= 0 {
		return
	}
	if l.isSlidingLog() {
		l.refundLog(key, cost, at)
		return
	}
	now := l.now()
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if done, live := refundAt(t.p, &sl.word, cost, at, now); live && done {
			l.tally.countRefund()
			return
		}
		// Retired meanwhile, or the refund leaves the state fresh: then
		// the entry goes in the same CAS, under the mutex.
	}
	if sl, _ := l.lockSlot(s, h, key, now, 0); sl != nil {
		l.refundLocked(s, sl, cost, at, now)
		l.tally.countRefund()
	}
	s.mu.Unlock()
}

// refundLocked gives back cost admitted at instant at from sl, which is
// live, and removes the entry if that leaves its state fresh (a request
// refused by a later layer then leaves no state behind), in one CAS: no
// decision can come between the refund and the removal. Requires s.mu.
func (l *Limiter) refundLocked(s *shard, sl *slot, cost, at, now int64) {
	t := s.tab.Load()
	p := t.p
	for {
		old := sl.word.Load() // live: nothing retires it while we hold s.mu
		next := p.refundWord(old, cost, at, now)
		if p.resetAfter(next, now) != 0 {
			if next == old || sl.word.CompareAndSwap(old, next) {
				return
			}
			continue
		}
		l.raiseSweptAt(p.judgedAt(next, now)) // before the entry goes: see gc.go
		if t.retireAs(sl, old, next) {
			l.keys.Add(-1)
			s.swept.Add(1)
			return
		}
	}
}

// retireFreshLocked retires sl if its state is fresh at now. Requires s.mu.
func (l *Limiter) retireFreshLocked(s *shard, sl *slot, now int64) {
	w := sl.word.Load()
	if w&deadBit != 0 || s.tab.Load().p.resetAfter(w, now) != 0 {
		return
	}
	l.raiseSweptAt(s.tab.Load().p.judgedAt(w, now)) // before the entry goes: see gc.go
	if s.tab.Load().retire(sl, w) {
		l.keys.Add(-1)
		s.swept.Add(1)
	}
}

// refundAt runs refund's CAS loop without a lock. live is false if the
// word is retired; done is false, with nothing written, if the refund
// would leave the state fresh (the caller then refunds under the mutex,
// removing the entry in the same CAS).
func refundAt(p *params, w *atomic.Uint64, cost, at, now int64) (done, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		next := p.refundWord(old, cost, at, now)
		if p.resetAfter(next, now) == 0 {
			return false, true
		}
		if next == old || w.CompareAndSwap(old, next) {
			return true, true
		}
	}
}

// refundWord is w after giving back cost admitted at instant at, at now.
func (p *params) refundWord(w uint64, cost, at, now int64) uint64 {
	if p.kind.isBucket() {
		return p.g.refund(w, now, cost)
	}
	return p.win.refund(w, cost, at)
}
