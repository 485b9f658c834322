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
		if fresh, live := refundAt(t.p, &sl.word, cost, at, now); live {
			l.tally.countRefund()
			if fresh {
				l.retireFresh(s, h, key, now)
			}
			return
		}
	}
	sl, _ := l.lockSlot(s, h, key, now, false)
	if sl != nil {
		if fresh, _ := refundAt(s.tab.Load().p, &sl.word, cost, at, now); fresh {
			l.retireFreshLocked(s, sl, now)
		}
		l.tally.countRefund()
	}
	s.mu.Unlock()
}

// retireFresh removes key's entry if its state is fresh, as a sweep would:
// a request refused by a later layer then leaves no state behind.
func (l *Limiter) retireFresh(s *shard, h uint64, key string, now int64) {
	if sl, _ := l.lockSlot(s, h, key, now, false); sl != nil {
		l.retireFreshLocked(s, sl, now)
	}
	s.mu.Unlock()
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

// refundAt runs refund's CAS loop. live is false if the word is retired;
// fresh reports whether the state is fresh afterwards.
func refundAt(p *params, w *atomic.Uint64, cost, at, now int64) (fresh, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		var next uint64
		if p.kind.isBucket() {
			next = p.g.refund(old, now, cost)
		} else {
			next = p.win.refund(old, cost, at)
		}
		if next == old || w.CompareAndSwap(old, next) {
			return p.resetAfter(next, now) == 0, true
		}
	}
}
