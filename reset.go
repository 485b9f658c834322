package hotlimit

// Reset returns key to a fresh key's state, as if the limiter had never
// seen it: an administrative act, for an operator who unblocks a client
// (a support ticket, a false positive, a changed plan). It is not part of
// normal traffic: a request that was refused must wait out its RetryAfter,
// and work that did not happen is given back with an Admission's Refund.
//
// What it does, for each policy: the token and leaky buckets are full
// again (no debt, no Delay); the fixed window and the sliding-window
// counter forget their counts, including the previous window's; the
// sliding log forgets every admitted instant. In each case the key's entry
// is removed, so the next request for key is decided exactly as the first
// request of a new key at that instant. Reset of a key the limiter does
// not hold, or of a key longer than MaxKeyLen, does nothing. A
// ConcurrencyLimiter has no Reset: its counts are operations in flight,
// which end only when they are released.
//
// Stats: Keys (and Len) drop by one when the entry is removed; Allowed and
// Denied keep the decisions already made; Swept and Evicted do not count a
// reset.
//
// A give-back of an admission on key made before the reset (a later layer
// of AllowLayers refusing, a Wait whose context ends while it sleeps, an
// Admission's Refund) gives back nothing: the reset forgot that admission
// with the rest, and the state after it owes that admission nothing.
// Give-backs on other keys are not affected.
//
// Reset is safe for concurrent use with every other method. It takes
// effect at one instant: a decision on key that completes before it is
// forgotten with the rest of the state, and one that starts after it sees
// a fresh key, so no admission is lost or counted twice. It is not on the
// decision path: it takes the key's shard mutex, as inserting a new key
// does.
func (l *Limiter) Reset(key string) {
	if len(key) > MaxKeyLen || l.kind == kindConcurrency {
		return
	}
	if l.isSlidingLog() {
		l.resetLog(key)
		return
	}
	h := l.hash(key)
	s := l.shardOf(h)
	sl, _ := l.lockSlot(s, h, key, 0, 0) // locks s.mu
	defer s.mu.Unlock()
	if sl == nil {
		return
	}
	// shard.go, protocol step 7. A decision that re-creates the key is
	// decided as any new key's first request, at its own reading
	// (Limiter.vacant): the Reset raises nothing, so neither a reading
	// taken before it nor a ManualClock set back below it finds the key
	// owing what the Reset forgot. A give-back of an admission made
	// before it finds another incarnation and gives nothing (step 9).
	t := s.tab.Load()
	for {
		// Nothing else retires the slot while s.mu is held, so a failed
		// CAS means a decision changed the word: that admission happened
		// before the reset, and is forgotten with the rest (step 4).
		w := sl.word.Load()
		if w&deadBit != 0 {
			return // cannot happen under s.mu; never spin on it
		}
		if t.retire(sl, w) {
			l.keys.Add(-1)
			return
		}
	}
}

// resetLog is Reset for the sliding log: it deletes key's ring.
func (l *Limiter) resetLog(key string) {
	ls, _ := l.logShardOf(key)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	r, ok := ls.m[key]
	if !ok {
		return
	}
	ls.ringBytes.Add(-ringBytes(len(key), len(r.t)))
	delete(ls.m, key)
	l.keys.Add(-1)
}
